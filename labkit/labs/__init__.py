"""Every lab's own code, one module per lab step, named for its lab: the per-seed runs its notebook calls
(``lab0_finetune``, ``lab1_sweeps``, ``lab3_formats``, ``lab4_accuracy``, ``lab4_checks``, ``lab4_perf``),
Lab 2's architecture space, objective and study plans (``lab2_space``, ``lab2_objectives``, ``lab2``), Lab 3's
mixed-precision objective and study plans (``lab3_precision``, ``lab3``), and ``per_seed``, which runs a lab's
per-seed work and keeps each finished seed. They run on the library packages (``quant``, ``kernels``,
``training``, ``search``, ``perf``), which never import a lab."""
