"""Hindsight experience replay (HER, Andrychowicz et al. 2017) as a replay-side data
transformer: :class:`HindsightRelabeler`.

Goal-conditioned envs (gymnasium-robotics' convention) observe a dict with
``observation``, ``achieved_goal`` (what the state achieves) and ``desired_goal``
(what the episode asks for), and reward a step by comparing the two. With a sparse
reward a failed episode teaches nothing about its own goal, but it does show how to
reach the goals it achieved. HER's ``future`` strategy replays a sampled transition
with, as its desired goal, the achieved goal of a later step of the same episode,
and the reward recomputed for that goal.

Where it runs: every mini-batch sampled from the online replay buffer goes through
``DataTransformer.transform_experience`` (called by
:func:`alf.algorithms.replay_training.preprocess_sampled`, before the algorithm's
``preprocess_experience``), with the batch's ``BatchInfo`` (rows, start positions and
the buffer), so that later steps can be read from the buffer. Live time steps pass
through unchanged. Nothing in the Learner, the Trainer or ``RLAlgorithm`` knows
about goals. docs/design/hindsight_goals.md says why it is built this way.
"""
from typing import Any, Callable, Optional, Tuple

import torch

import alf
from alf import nest as alf_nest
from alf.algorithms.data_transformers import DataTransformer
from alf.config_ranges import NonNegative
from alf.data_structures import BatchInfo, Experience, TimeStep
from alf.environments.goal_reward import GoalEnvReward
from alf.errors import ConfigError
from alf.replay_buffers import ReplayBuffer
from alf.replay_buffers.episode_ends import episode_ends

Nest = Any
#: ``reward_fn(achieved_goal [N, G], desired_goal [N, G], info (nest of [N, ...])) -> [N]``
RewardFn = Callable[[torch.Tensor, torch.Tensor, Nest], torch.Tensor]


@alf.configurable
class HindsightRelabeler(DataTransformer):
    """Relabel sampled replay with HER's ``future`` goals (Andrychowicz et al. 2017).

    Each sampled sequence (positions ``p .. p+L-1`` of one env's row; ``L = n_step + 1``
    for DQN, DDPG, SAC and TD3) is relabeled with probability ``k / (k + 1)``: a
    position ``f`` is drawn uniformly from ``[min(p+L-1, e), e]``, ``e`` being the
    last stored step of the episode of ``p`` (its ``LAST`` step, the step before the
    next ``FIRST`` if it was cut short, or the newest stored step of an episode still
    running), so the goal comes from the same episode, at the step whose reward the
    sequence bootstraps from or later. The row's
    ``desired_goal`` becomes ``achieved_goal`` at ``f`` on every step up to ``e``, and
    those steps' rewards become ``reward_fn(achieved_goal, new goal, env_info)``. Steps
    after ``e`` (the next episode) and rows starting at a ``LAST`` step (no
    transition) are left as stored. Discounts and step types are kept as stored (as
    the HER paper and its common implementations do).

    Args:
        observation_spec: a dict spec holding ``achieved_goal_key`` and
            ``desired_goal_key`` leaves of the same shape.
        relabel_ratio_k: HER's ``k``, relabeled goals per original one: a fraction
            ``k / (k + 1)`` of the sampled sequences is relabeled (the paper's 4 gives
            0.8; 0 turns relabeling off).
        reward_fn: ``(achieved_goal [N, G], desired_goal [N, G], info) -> reward [N]``
            (``info``: the stored ``env_info`` nest, ``[N, ...]``). ``None``: the run's
            env's ``compute_reward`` (:class:`~alf.environments.goal_reward.GoalEnvReward`),
            called on the learner, wherever the envs run.
        achieved_goal_key: observation key of the achieved goal.
        desired_goal_key: observation key of the desired goal.
    """

    changes_observation = False  # live steps pass through; only replay is relabeled

    def __init__(self, observation_spec: Nest, relabel_ratio_k: NonNegative = 4.0,
                 reward_fn: Optional[RewardFn] = None, achieved_goal_key: str = "achieved_goal",
                 desired_goal_key: str = "desired_goal"):
        super().__init__(observation_spec)
        _check_goal_spec(observation_spec, achieved_goal_key, desired_goal_key)
        if relabel_ratio_k < 0:
            raise ConfigError(f"HindsightRelabeler.relabel_ratio_k must be >= 0, got "
                              f"{relabel_ratio_k}")
        self._fraction = float(relabel_ratio_k) / (float(relabel_ratio_k) + 1.0)
        if reward_fn is None:
            reward_fn = GoalEnvReward()
        if isinstance(reward_fn, GoalEnvReward):
            reward_fn.check()  # a missing compute_reward: refused before the run writes
        self._reward_fn = reward_fn
        self._keys = (achieved_goal_key, desired_goal_key)

    @property
    def relabel_fraction(self) -> float:
        """``k / (k + 1)``: the share of sampled sequences that is relabeled."""
        return self._fraction

    def transform_timestep(self, time_step: TimeStep, state: Nest) -> Tuple[TimeStep, Nest]:
        return time_step, state

    def transform_replay(self, time_step: TimeStep) -> TimeStep:
        return time_step

    def transform_experience(self, experience: Experience) -> Experience:
        """Relabel a sampled ``[B, L]`` batch (its ``BatchInfo`` names the buffer and the
        rows' start positions); see the class docstring."""
        info = experience.batch_info
        if not (isinstance(info, BatchInfo) and isinstance(info.replay_buffer, ReplayBuffer)):
            raise ConfigError(
                "HindsightRelabeler relabels mini-batches sampled from the online replay "
                "buffer, and this batch came from elsewhere (offline data or a whole-buffer "
                "pass): leave it out of data_transformer_ctor for such training")
        if self._fraction <= 0.0:
            return experience
        ts = experience.time_step
        B, L = ts.step_type.shape[:2]
        device = ts.step_type.device
        rows = (torch.rand(B, device=device) < self._fraction).nonzero(as_tuple=True)[0]
        env_ids, start = info.env_ids[rows], info.positions[rows]
        ends = episode_ends(info.replay_buffer, env_ids, start)
        keep = ends > start  # a row starting at its episode's last step has no transition
        rows, env_ids, start, ends = rows[keep], env_ids[keep], start[keep], ends[keep]
        goals = self._future_goals(info.replay_buffer, env_ids, start, ends, L)
        in_episode = (start[:, None] + torch.arange(L, device=device)[None, :]) <= ends[:, None]
        return experience._replace(time_step=self._relabeled(ts, rows, goals, in_episode))

    def _future_goals(self, buffer: ReplayBuffer, env_ids: torch.Tensor, start: torch.Tensor,
                      ends: torch.Tensor, length: int) -> torch.Tensor:
        """``[R, G...]``: the achieved goal at a position drawn uniformly from
        ``[min(start + length - 1, end), end]`` of each row."""
        low = torch.minimum(start + length - 1, ends)
        u = torch.rand(low.shape, device=low.device)
        future = torch.minimum(low + (u * (ends - low + 1).to(u.dtype)).to(torch.int64), ends)
        key = self._keys[0]
        return buffer.get_by_position(env_ids, future, 1,
                                      select=lambda s: s.time_step.observation[key])[:, 0]

    def _relabeled(self, ts: TimeStep, rows: torch.Tensor, goals: torch.Tensor,
                   in_episode: torch.Tensor) -> TimeStep:
        """``ts [B, L]`` with rows ``rows [R]`` given ``goals [R, G...]`` as desired goal on
        the steps ``in_episode [R, L]``, and those steps' rewards recomputed."""
        achieved_key, desired_key = self._keys
        obs = ts.observation
        old = obs[desired_key][rows]  # [R, L, G...]
        mask = in_episode.view(in_episode.shape + (1,) * (old.ndim - 2))
        new = torch.where(mask, goals[:, None].to(old.dtype), old)
        R, L = in_episode.shape
        flat = lambda x: x.reshape((R * L,) + tuple(x.shape[2:]))  # noqa: E731
        env_info = alf_nest.map_structure(lambda x: flat(x[rows]), ts.env_info)
        reward = self._reward_fn(flat(obs[achieved_key][rows]), flat(new), env_info)
        reward = torch.where(in_episode, reward.view(R, L).to(ts.reward.dtype), ts.reward[rows])
        desired = obs[desired_key].index_put((rows,), new)
        return ts._replace(observation={**obs, desired_key: desired},
                           reward=ts.reward.index_put((rows,), reward))


def _check_goal_spec(spec: Nest, achieved_key: str, desired_key: str) -> None:
    """One-line ConfigError unless ``spec`` is a dict with both goal keys of one shape."""
    if not isinstance(spec, dict) or achieved_key not in spec or desired_key not in spec:
        keys = sorted(spec) if isinstance(spec, dict) else type(spec).__name__
        raise ConfigError(
            f"HindsightRelabeler needs a dict observation with '{achieved_key}' and "
            f"'{desired_key}' (gymnasium-robotics' goal convention), got {keys}: set "
            "HindsightRelabeler.achieved_goal_key/desired_goal_key or use a goal env")
    a, d = spec[achieved_key], spec[desired_key]
    if tuple(a.shape) != tuple(d.shape):
        raise ConfigError(f"HindsightRelabeler: '{achieved_key}' has shape {tuple(a.shape)} and "
                          f"'{desired_key}' {tuple(d.shape)}: goals must have the same shape")
