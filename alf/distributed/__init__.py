"""Data-parallel training with ``torchrun`` (see docs/distributed.md).

- :mod:`alf.distributed.rank_group`: joining the ranks, collectives that name a lost rank.
- :mod:`alf.distributed.state_sync`: gradient all-reduce, initial broadcast, drift check.
- :mod:`alf.distributed.rank_sync`: env steps, normaliser statistics, metrics, stopping.
- :mod:`alf.distributed.faults`: naming the rank that died; SIGTERM and launcher death.
"""
from alf.distributed.faults import PeerLostError
from alf.distributed.rank_group import RankGroup, launched_by_torchrun
from alf.distributed.rank_sync import DataParallel

__all__ = ["DataParallel", "PeerLostError", "RankGroup", "launched_by_torchrun"]
