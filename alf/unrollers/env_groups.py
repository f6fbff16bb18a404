"""How an async run splits its envs into env worker processes and env groups.

Every group steps the same number of envs (its trajectories stack into one
``[T + 1, B]`` batch shape), so ``num_parallel_environments`` must be a multiple
of ``num_env_workers x env_groups_per_worker``. The group count's default (2,
double buffering) is a throughput choice, not something the user asked for, so
an env count it does not divide (DQN's and SAC's single env) runs with fewer
groups and a note, instead of failing: any off-policy example then runs with
``async_unroll=True`` as it is. A count the config sets explicitly is honoured
or refused.
"""
from typing import NamedTuple, Optional

from alf.errors import ConfigError


class EnvSplit(NamedTuple):
    """``groups`` env groups per worker, ``per_group`` envs each; ``note``: the line that
    says the default group count was lowered (None when it was not)."""
    groups: int
    per_group: int
    note: Optional[str] = None


def split_envs(num_envs: int, workers: int, groups: int, groups_set: bool) -> EnvSplit:
    """Groups per worker and envs per group for ``num_envs`` envs over ``workers`` workers.

    Args:
        num_envs: ``create_environment.num_parallel_environments``.
        workers: env worker processes (``TrainerConfig.num_env_workers``; 1 in serial mode).
        groups: ``TrainerConfig.env_groups_per_worker``.
        groups_set: whether the config binds ``env_groups_per_worker`` (else ``groups`` is
            the default and may be lowered to the largest count that divides evenly).
    Raises:
        ConfigError: the envs cannot be split evenly with the configured numbers.
    """
    if num_envs % workers == 0 and not groups_set:
        fitting = max(g for g in range(1, groups + 1) if (num_envs // workers) % g == 0)
        if fitting != groups:
            note = (f"[alf] note: async unroll: {num_envs} env(s) over {workers} env worker(s) "
                    f"cannot be split into {groups} equal env groups per worker (the default "
                    f"of TrainerConfig.env_groups_per_worker); using {fitting}. Set "
                    "create_environment.num_parallel_environments to a multiple of "
                    f"{workers * groups} for double buffering.")
            return EnvSplit(fitting, num_envs // (workers * fitting), note)
    if num_envs % (workers * groups):
        raise ConfigError(
            f"async unroll: create_environment.num_parallel_environments ({num_envs}) must be "
            f"a multiple of TrainerConfig.num_env_workers x env_groups_per_worker ({workers} x "
            f"{groups}): each group gets the same number of envs")
    return EnvSplit(groups, num_envs // (workers * groups))
