"""The labs' own code that is neither a student-facing tool nor an engine: Lab 2's architecture space,
objective and study plans (``lab2_space``, ``lab2_objectives``, ``lab2``), Lab 3's mixed-precision objective and
study plans (``lab3_precision``, ``lab3``). They run on the search engine in ``labkit.search``."""
