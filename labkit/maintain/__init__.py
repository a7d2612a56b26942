"""Keeping the committed results true: the headline claims checked against the stored JSON (``claims``,
``python -m labkit.maintain.claims``) and the resumable full-profile regeneration on a GPU (``regenerate``,
``labkit regenerate``)."""
