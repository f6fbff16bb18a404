"""Making offline datasets from training runs: the tools beside ``alf.bin``.

:mod:`alf.dataset_tools.export` writes a run's saved replay buffer as a dataset;
:mod:`alf.dataset_tools.collect` runs a run's trained (or a random) policy and records
what it does. Both rebuild the run (its config, checkpoints and env), so they sit above
the trainers; the format they write, which training reads, is :mod:`alf.datasets`
(see ``docs/design/layers.md``). Command line: ``python -m alf.bin.export_dataset``.
"""
