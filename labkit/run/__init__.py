"""Running a lab notebook: its settings per profile (``profiles``), overrides checked against them
(``overrides``), and the headless papermill runner (``runner``) that ``labkit run``, the grader and the GPU
regeneration share."""
