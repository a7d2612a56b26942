"""What a notebook says while it runs, in words from the numbers it just measured (its base, its cost, how its
trials ran): shipped to students with the notebooks. The answers, which word the readings and hold the key, are
``labkit.answers`` (left out of the student release)."""
