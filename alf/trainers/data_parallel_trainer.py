"""The Trainer's side of a data-parallel (torchrun) run: joining the ranks,
checkpoints that hold every rank's own state, resuming every rank from rank 0's
files, and the periodic drift check.

What is whose in a checkpoint (written by rank 0 alone):

- shared by all ranks (bit-identical, saved once): the algorithm (parameters,
  optimizer state, normaliser statistics, target networks), the run counters
  (iteration, env steps summed over ranks, updates);
- each rank's own, gathered to rank 0 on save and scattered back on resume:
  RNG states (every rank explores and samples with its own stream), episode
  metrics and, with ``save_replay_buffer``, its replay buffer (each rank fills
  its own from its own envs). ``state["rng"]``/``state["metrics"]`` and the
  replay-buffer file's top level stay rank 0's, so a single process can resume
  a data-parallel run (and the other way round: ranks without a saved part
  start their own streams fresh and say so).

Why rank 0 reads and broadcasts instead of every rank reading the files: with
several hosts ``root_dir`` may live on rank 0's disk only, and a rank reading
while rank 0 writes could see a half-updated directory.
"""
from typing import Any, Callable, Dict, List, Optional, Tuple

from alf.distributed.rank_group import RankGroup
from alf.distributed.rank_sync import DataParallel, sync_end_of_iteration
from alf.distributed.state_sync import broadcast_state, find_drift
from alf.errors import RunFailedError
from alf.unrollers.async_unroller import configured_num_envs
from alf.utils.seeding import set_random_seed

__all__ = ["RankGroup", "RANK_SEED_STRIDE", "configured_num_envs", "join",
           "gather_checkpoint", "restore_on_ranks", "check_drift", "sync_end_of_iteration",
           "agree_stop_reason"]

#: Seeds of rank ``r`` (its torch/numpy/python RNGs and its async env workers) are offset
#: by ``r x RANK_SEED_STRIDE``; env seeds are offset through the env ids instead.
RANK_SEED_STRIDE = 1_000_033

RANK_BUFFERS_KEY = "alf_other_rank_buffers"


def join(group: RankGroup, algorithm: Any, unroller: Any, seed: int) -> DataParallel:
    """After building: start every rank from rank 0's parameters and buffers, give each
    rank its own random stream, and return the :class:`DataParallel` the algorithm's
    sync points call (through ``RunContext.data_parallel``)."""
    broadcast_state(group, algorithm)
    set_random_seed((int(seed) + group.rank * RANK_SEED_STRIDE) % (2 ** 31))
    return DataParallel(group, algorithm.data_transformer, unroller)


def gather_checkpoint(group: RankGroup, state: Dict[str, Any],
                      rb_state: Optional[Dict[str, Any]]
                      ) -> Optional[Tuple[Dict[str, Any], Optional[Dict[str, Any]]]]:
    """Rank 0: ``(state, rb_state)`` with every rank's RNG states, metrics and replay
    buffer; the other ranks send theirs and get None.

    Args:
        state: this rank's training state (``rng`` and ``metrics`` are its own).
        rb_state: this rank's replay buffer state, or None when buffers are not saved.
    """
    part = {"rng": state["rng"], "metrics": state["metrics"], "replay_buffer": rb_state}
    parts = group.gather_object(part, "saving a checkpoint")
    if parts is None:
        return None
    state = dict(state, ranks=[{"rng": p["rng"], "metrics": p["metrics"]} for p in parts],
                 world_size=group.world_size)
    if rb_state is not None:
        rb_state = dict(rb_state)
        rb_state[RANK_BUFFERS_KEY] = [p["replay_buffer"] for p in parts[1:]]
    return state, rb_state


def split_rank_buffers(rb_state: Optional[Dict[str, Any]]
                       ) -> Tuple[Optional[Dict[str, Any]], List[Optional[Dict[str, Any]]]]:
    """``(rank 0's buffer state, [rank 1's, rank 2's, ...])`` of a saved buffer file."""
    if rb_state is None:
        return None, []
    rb_state = dict(rb_state)
    others = rb_state.pop(RANK_BUFFERS_KEY, [])
    return rb_state, list(others)


def restore_on_ranks(group: RankGroup, load: Callable[[], Optional[tuple]]
                     ) -> Optional[Tuple[int, Dict[str, Any], Optional[Dict[str, Any]], bool]]:
    """Rank 0 runs ``load`` (the newest valid checkpoint, checked against this
    experiment; its errors reach every rank); every rank gets
    ``(iteration, state, own replay buffer state, own part found)`` with ``state["rng"]``
    and ``state["metrics"]`` replaced by its own, or None when there is no checkpoint."""
    kept: Dict[str, Any] = {}

    def decide():
        found = load()
        if found is None:
            return None
        iteration, state, rb_state = found
        kept["state"], kept["rb"] = state, rb_state
        return iteration, {k: v for k, v in state.items() if k != "ranks"}

    shared = group.rank0_decides(decide, "loading the checkpoint")
    if shared is None:
        return None
    iteration, state = shared
    parts = None
    if group.is_main:
        ranks = kept["state"].get("ranks") or [
            {"rng": kept["state"]["rng"], "metrics": kept["state"].get("metrics", {})}]
        own_rb, other_rbs = split_rank_buffers(kept["rb"])
        buffers = [own_rb] + other_rbs
        parts = [dict(ranks[r], replay_buffer=buffers[r] if r < len(buffers) else None)
                 if r < len(ranks) else None for r in range(group.world_size)]
    part = group.scatter_object(parts, "resuming from the checkpoint")
    if part is None:
        return iteration, state, None, False
    state = dict(state, rng=part["rng"], metrics=part["metrics"])
    return iteration, state, part["replay_buffer"], True


def agree_stop_reason(group: RankGroup, reason: Optional[Tuple[int, Optional[str]]]
                      ) -> Optional[Tuple[int, Optional[str]]]:
    """Once the ranks agreed to stop: why, the same on every rank (a signal, or the loss
    of a launcher, may have reached only some of them). A reason with a cause (e.g. "the
    launcher (pid 7) exited") wins, then the lowest rank's signal."""
    reasons = [r for r in group.all_gather_object(reason, "agreeing why the run stops")
               if r is not None]
    with_cause = [r for r in reasons if r[1]]
    return (with_cause or reasons or [None])[0]


def check_drift(group: RankGroup, algorithm: Any, action: str,
                notice: Callable[[str], None]) -> None:
    """Compare every rank's parameters and buffers bit by bit with rank 0's.

    Args:
        action: ``"resync"``: warn and copy rank 0's state to every rank; ``"error"``:
            stop the run (:class:`RunFailedError`, exit status 1) naming what drifted.
    """
    drift = find_drift(group, algorithm)
    if not drift:
        return
    named = ", ".join(f"{name} (rank {', '.join(map(str, ranks))})" for name, ranks in drift[:3])
    more = f" and {len(drift) - 3} more" if len(drift) > 3 else ""
    what = (f"parameters differ between ranks: {named}{more} differ from rank 0's (something "
            "updates state outside update_with_gradient, or the ranks' hardware rounds "
            "differently)")
    if action == "error":
        error = RunFailedError(f"{what}; TrainerConfig.distributed_drift='resync' would copy "
                               "rank 0's state over instead")
        error.alf_silent = not group.is_main  # every rank found the same: rank 0 says it
        raise error
    notice(f"[alf] warning: {what}; copied rank 0's parameters and buffers to every rank")
    broadcast_state(group, algorithm)
