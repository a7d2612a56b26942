"""Every lab's own code, modules named for their lab: the per-seed runs its notebook calls (``lab0_finetune``,
``lab1_sweeps``, ``lab3_formats``, ``lab4_accuracy``, ``per_seed``, which keeps each finished seed), the payloads a
notebook stores and the rows and numbers it shows, which ``labkit.narrate`` words (``lab0_graphs``,
``lab1_quantize``, ``lab1_prune``, ``lab2_tasks``, ``lab3_search``, ``lab3_formats_summary``, ``lab4_kernel``,
``lab4_memory``, ``lab4_checks``, ``lab4_perf``), the searches' spaces, objectives and study plans (``lab2_space``,
``lab2_objectives``, ``lab2``, ``lab3_precision``, ``lab3``) and the re-measurement of searched bests
(``lab2_remeasure``, ``lab3_remeasure``). Each notebook's record is in ``labkit.records``. They run on the library
packages (``quant``, ``kernels``, ``training``, ``search``, ``perf``), which never import a lab."""
