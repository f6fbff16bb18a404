"""Count-based exploration with SimHash (Tang et al. 2017, "#Exploration: A Study of
Count-Based Exploration for Deep Reinforcement Learning", arXiv:1611.04717) as an
:class:`~alf.algorithms.agent.Agent` reward module.

Observations are discretised by SimHash, ``phi(s) = sgn(A s)`` with a fixed Gaussian
matrix ``A [k, D]`` (``k`` bits: nearby observations tend to share a code, and ``k``
sets the granularity), each code's visits are counted, and arriving at ``s`` earns
``beta / sqrt(n(phi(s)))`` (the paper's bonus, sec. 2). A visit is a collected step:
counts grow in :meth:`CountRewardModule.observe`, once per step when its unroll is
stored, so under replay a step sampled many times is still one visit; the bonus is read
for every trained batch. Codes index a table of ``table_size`` counts (``2^k`` by
default: one count per code; a smaller table folds codes together, ``code mod
table_size``, and shared counts only lower bonuses; above ``2^24`` counts the size must
be given). In a data-parallel run each rank's new steps' count ids are gathered (not a
dense table of counts all-reduced), so the exchange grows with the steps, not the table.
No parameters: no optimizer and no
gradient step (the counts and ``A`` are buffers, checkpointed, left off the actors).
"""
from typing import Any, Optional

import torch

import alf
from alf.algorithms.reward_module import RewardModule
from alf.config_ranges import Positive
from alf.errors import ConfigError
from alf.tensor_specs import TensorSpec
from alf.utils.run_context import RunContext

#: the most counts a table gets without an explicit ``table_size`` (2^24 int64: 128 MiB)
MAX_DEFAULT_TABLE = 2 ** 24


@alf.configurable
class CountRewardModule(RewardModule):
    """The count bonus ``beta / sqrt(n(phi(s)))`` of arriving at ``s``.

    Args:
        observation_spec, action_spec, context, debug_summaries, name: see
            :class:`RewardModule`. The observation must be one tensor (flattened to
            ``D`` numbers for the projection).
        code_bits: ``k``, bits of the SimHash code (1 to 62).
        table_size: number of counts (None: ``2^k``, one per code, for ``k`` up to 24;
            at most ``2^k``). Codes are hashed into the table (``code mod table_size``):
            a smaller table collides more codes into a shared count (lower bonuses).
        beta: the bonus scale.
        gamma, episodic: see :class:`RewardModule` (default: the RL algorithm's discount,
            episodic).
    """

    uses_previous_step = False

    def __init__(self, observation_spec: Any, action_spec: Any, code_bits: int = 16,
                 table_size: Optional[int] = None, beta: Positive = 0.01,
                 gamma: Optional[float] = None, episodic: bool = True,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "CountRewardModule"):
        super().__init__(observation_spec, action_spec, gamma=gamma, episodic=episodic,
                         context=context, debug_summaries=debug_summaries, name=name)
        if not isinstance(observation_spec, TensorSpec):
            raise ConfigError(f"{name}: the observation must be one tensor, got "
                              f"{observation_spec!r}")
        if not 1 <= int(code_bits) <= 62:
            raise ConfigError(f"{name}.code_bits = {code_bits} is out of range: 1 to 62")
        codes = 2 ** int(code_bits)
        if table_size is None and codes > MAX_DEFAULT_TABLE:
            raise ConfigError(
                f"{name}.code_bits = {code_bits}: one count per code is 2^{code_bits} = "
                f"{codes:,} counts ({codes * 8 / 2 ** 40:.1f} TiB); set {name}.table_size "
                f"(e.g. {MAX_DEFAULT_TABLE:,}) to hash the codes into that many counts "
                "(fewer counts: more codes collide and share one, which lowers their "
                "bonus), or lower code_bits to 24 or less")
        size = codes if table_size is None else int(table_size)
        if not 1 <= size <= codes:
            raise ConfigError(f"{name}.table_size = {table_size} is out of range: 1 to "
                              f"2^code_bits = {2 ** int(code_bits)} (None: one count per code)")
        dim = max(1, int(torch.Size(observation_spec.shape).numel()))
        self.register_buffer("projection", torch.randn(int(code_bits), dim))  # A, fixed
        self.register_buffer("bit_values", 2 ** torch.arange(int(code_bits), dtype=torch.int64),
                             persistent=False)
        self.register_buffer("counts", torch.zeros(size, dtype=torch.int64))
        self._beta = float(beta)

    def bucket(self, observation: torch.Tensor) -> torch.Tensor:
        """``[N]`` int64: the count index of each observation ``[N, ...]`` (its SimHash
        code ``sgn(A s)`` as a ``k``-bit number, mod ``table_size``)."""
        x = observation.reshape(observation.shape[0], -1).to(self.projection.dtype)
        bits = (x @ self.projection.t() > 0).to(torch.int64)  # [N, k]
        return (bits * self.bit_values).sum(-1) % self.counts.numel()

    def observe(self, prev_observation: Any, prev_action: Any, observation: torch.Tensor,
                valid: torch.Tensor) -> None:
        """Count each newly collected observation ``[N]`` once (every rank's, in a
        data-parallel run, so the counts stay identical on all ranks)."""
        buckets = self.bucket(observation)
        dp = self._context.data_parallel
        if dp is not None:  # every rank's steps: the ids, not a dense table of counts
            buckets = dp.cat_over_ranks(buckets)
        self.counts.index_add_(0, buckets, torch.ones_like(buckets))

    @torch.no_grad()
    def reward(self, prev_observation: Any, prev_action: Any,
               observation: torch.Tensor) -> torch.Tensor:
        """``[N]``: ``beta / sqrt(n)`` of each observation's count (``n`` at least 1: an
        observation not counted yet earns ``beta``)."""
        n = self.counts[self.bucket(observation)].clamp(min=1)
        return self._beta / n.to(torch.float32).sqrt()
