"""Reliability machinery (issue 18): the bad-input battery over every command, kill -9 at
seeded random points, and fuzzed readers. ``benchmarks/house/robustness.py`` runs the same code.

- :mod:`robustness.world`: the tiny synthetic world the cases run in (no corpus needed);
- :mod:`robustness.inputs`: the bad inputs, one kind a function;
- :mod:`robustness.table`: the one table of (command, input slot) rows the cases come from,
  and :mod:`robustness.cases`: the cases, what each must give, running one;
- :mod:`robustness.work`: the commands that write, met with a full disk, an output path
  through a file, and Ctrl-C;
- :mod:`robustness.runner`: running a command in-process or as a subprocess, and the checks;
- :mod:`robustness.kill`: the kill-anywhere harness;
- :mod:`robustness.readers`: the readers the fuzzers feed.
"""
