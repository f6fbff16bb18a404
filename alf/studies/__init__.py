"""Research workflow around runs: sweeps over hyper-parameters and seeds, population-based
training, and statistics across seeds (``alf.bin.sweep``, ``alf.bin.pbt``, ``alf.bin.compare``).

Every trial is an ordinary alf run (``python -m alf.bin.train``) in its own ``root_dir``;
this package starts them, reads what they wrote (``progress.csv``, ``eval.csv``) and keeps
the study's state in an Optuna storage.
"""
