"""The per-iteration agreements between ranks: env steps, normaliser statistics,
episode metrics and when to stop.

- :meth:`DataParallel.after_unroll` (every unroll): the env steps of all ranks are summed,
  so the stop condition, schedules and summaries count the whole run's steps;
  the normaliser statistics each rank gathered since the last unroll are merged
  on every rank in rank order, so the statistics stay bit-identical (exact
  moment merging, :func:`alf.utils.normalizers.combine_moments`).
- :func:`sync_end_of_iteration` (every iteration): whether any rank was asked to
  stop (Ctrl-C reaches ranks at different moments; all must stop at the same
  iteration boundary to save one consistent checkpoint), and the episode
  metrics of all ranks (their return windows pooled).
"""
import math
from typing import Any, NamedTuple, Sequence, Tuple

import torch

from alf.distributed.rank_group import RankGroup
from alf.distributed.state_sync import average_gradients


class DataParallel:
    """What the algorithm calls at its two sync points in a data-parallel run
    (``RunContext.data_parallel``; None in a single process).

    Args:
        group: the ranks.
        transformer: the learner's data transformer; frozen here, so that its updates
            accumulate as pending moments (:meth:`DataTransformer.freeze_statistics`)
            and are merged over ranks after every unroll.
        unroller: this rank's unroller; an async one hands over the statistics its env
            workers shipped (``pop_statistics()``), kept unmerged in distributed runs.
    """

    def __init__(self, group: RankGroup, transformer: Any, unroller: Any):
        self.group = group
        self._transformer = transformer
        self._unroller = unroller
        transformer.freeze_statistics(True)
        # whether there are statistics at all is a property of the transformer's type,
        # the same on every rank: without any, a tensor all-reduce is all it takes
        self._has_statistics = bool(transformer.pop_statistics())

    def average_gradients(self, params: Sequence[torch.Tensor]) -> None:
        """See :func:`alf.distributed.state_sync.average_gradients`."""
        average_gradients(self.group, params)

    def sum_over_ranks(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over ranks (a new tensor, identical on every rank); every rank
        calls it at the same point, e.g. to fold every rank's batch into running
        statistics (:meth:`alf.utils.normalizers.RunningMeanVar.update`)."""
        return self.group.all_reduce_(tensor.clone(), "summing statistics over ranks")

    def cat_over_ranks(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's ``tensor [n_r, ...]`` concatenated in rank order ``[sum n_r, ...]``
        (identical on every rank, on ``tensor``'s device; the ``n_r`` may differ): e.g.
        the count ids of each rank's new steps, far fewer than a dense table of counts
        (:class:`alf.algorithms.count_reward_module.CountRewardModule`)."""
        every = self.group.all_gather_object(tensor.cpu(), "gathering over ranks")
        return torch.cat(every).to(tensor.device)

    def all_ranks(self, flag: bool) -> bool:
        """Whether ``flag`` holds on every rank (one tiny all-reduce): for decisions that
        depend on a rank's own data, e.g. whether its replay buffer is ready to train on,
        which must come out the same everywhere or the ranks' updates would not pair up."""
        v = torch.tensor([0.0 if flag else 1.0], dtype=torch.float64)
        return float(self.group.all_reduce_(v, "agreeing whether to train")[0]) == 0.0

    def after_unroll(self, local_steps: int) -> int:
        """Merge every rank's new normaliser statistics (in rank order: the same merges
        on every rank) and return the env steps all ranks took in this unroll.

        Args:
            local_steps: env steps this rank's unroller just took.
        """
        if not self._has_statistics:
            steps = torch.tensor([float(local_steps)], dtype=torch.float64)
            return int(self.group.all_reduce_(steps, "the env-step count")[0])
        pending = []
        if hasattr(self._unroller, "pop_statistics"):
            pending.extend(self._unroller.pop_statistics())
        own = self._transformer.pop_statistics()
        if own:
            pending.append(own)
        every = self.group.all_gather_object((int(local_steps), pending),
                                             "the normaliser statistics merge")
        for _, stats_list in every:
            for stats in stats_list:
                self._transformer.merge_statistics(stats)
        return sum(steps for steps, _ in every)


class MergedMetrics(NamedTuple):
    """Episode metrics pooled over ranks (each rank's window of recent episodes)."""
    mean_return: float
    mean_length: float
    num_episodes: int

    def average_return(self) -> float:
        return self.mean_return

    def average_length(self) -> float:
        return self.mean_length


def sync_end_of_iteration(group: RankGroup, stop_requested: bool,
                          metrics: Any) -> Tuple[bool, MergedMetrics]:
    """One small all-reduce: ``(any rank asked to stop, metrics pooled over ranks)``.

    Args:
        stop_requested: this rank saw Ctrl-C (its interrupt guard's request).
        metrics: this rank's :class:`~alf.metrics.EpisodeMetrics`.
    """
    returns, lengths = metrics.recent_episodes()
    v = torch.tensor([float(stop_requested), sum(returns), float(len(returns)), sum(lengths),
                      float(metrics.num_episodes)], dtype=torch.float64)
    group.all_reduce_(v, "the end-of-iteration sync")
    n = float(v[2])
    merged = MergedMetrics(float(v[1]) / n if n else math.nan,
                           float(v[3]) / n if n else math.nan, int(v[4]))
    return bool(v[0] > 0), merged

