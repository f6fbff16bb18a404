"""Offline datasets as training reads them: alf's on-disk format (:mod:`alf.datasets.format`),
loading datasets into a replay buffer (:mod:`alf.datasets.offline_buffer`) and Minari
import/export (:mod:`alf.datasets.minari_io`). Making datasets from a run (its saved replay
buffer, or its policy) is :mod:`alf.dataset_tools`, which sits above the trainers. See
``docs/design/offline_dataset_format.md`` and ``docs/design/layers.md``."""
from alf.datasets.format import (  # noqa: F401
    Dataset, DatasetError, DatasetInfo, DatasetSteps, DatasetWriter, open_dataset, write_dataset)
