"""Offline datasets: alf's on-disk format (:mod:`alf.datasets.format`), making datasets from
a run's saved replay buffer (:mod:`alf.datasets.export`) or by running a policy
(:mod:`alf.datasets.collect`). See ``docs/design/offline_dataset_format.md``."""
from alf.datasets.format import (  # noqa: F401
    Dataset, DatasetError, DatasetInfo, DatasetSteps, DatasetWriter, open_dataset, write_dataset)
