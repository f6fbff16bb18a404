"""Episode return / length tracking on the *raw* environment stream.

Computed before any data transformer, so reported returns are the real ones
(unclipped, unnormalised). Cheap enough to run every step: two vector adds and
one ``any()`` per step.
"""
from collections import deque
from typing import Deque, List, Tuple

import torch

from alf.data_structures import StepType, TimeStep


class EpisodeMetrics:
    """Running per-env return/length; completed episodes kept in a window.

    Args:
        num_envs: batch size of the env.
        buffer_size: completed episodes averaged by :meth:`average_return`.
        track_finished: also keep each finished episode until :meth:`pop_finished`
            (an env worker's metrics, drained every trajectory).
    """

    def __init__(self, num_envs: int, buffer_size: int = 20, track_finished: bool = False):
        self._returns = torch.zeros(num_envs, dtype=torch.float64)
        self._lengths = torch.zeros(num_envs, dtype=torch.int64)
        self._recent_returns: Deque[float] = deque(maxlen=buffer_size)
        self._recent_lengths: Deque[int] = deque(maxlen=buffer_size)
        self.num_episodes = 0
        self.num_env_steps = 0
        self._track_finished = track_finished
        self._finished: List[Tuple[float, int]] = []  # since the last pop_finished()

    def update(self, time_step: TimeStep) -> List[float]:
        """Account one batched step ``[B]``; returns the returns of episodes that ended."""
        step_type = time_step.step_type
        first = step_type == StepType.FIRST
        reward = time_step.reward
        if reward.ndim > 1:
            reward = reward.sum(dim=tuple(range(1, reward.ndim)))
        self._returns += torch.where(first, 0.0, reward.to(torch.float64))
        self._lengths += (~first).to(torch.int64)
        # every time step counts, including the FIRST step an autoreset produces (as ALF does)
        self.num_env_steps += int(step_type.numel())
        last = step_type == StepType.LAST
        finished: List[float] = []
        if bool(last.any()):
            idx = last.nonzero().flatten()
            rets = self._returns[idx].tolist()
            lens = self._lengths[idx].tolist()
            self._recent_returns.extend(rets)
            self._recent_lengths.extend(lens)
            if self._track_finished:
                self._finished.extend(zip(rets, lens))
            self.num_episodes += len(rets)
            self._returns[idx] = 0.0
            self._lengths[idx] = 0
            finished = rets
        return finished

    def update_sequence(self, step_types: torch.Tensor, rewards: torch.Tensor) -> None:
        """Account ``T`` consecutive steps at once: ``step_types`` ``[T, B]``, ``rewards``
        ``[T, B, ...]``. Same result as ``T`` calls of :meth:`update`, ~10x cheaper
        (one numpy conversion, then tiny numpy ops per step)."""
        st = step_types.numpy()
        rw = rewards.detach().to(torch.float64)
        if rw.ndim > 2:
            rw = rw.sum(dim=tuple(range(2, rw.ndim)))
        rw = rw.numpy()
        returns = self._returns.numpy()
        lengths = self._lengths.numpy()
        for t in range(st.shape[0]):
            not_first = st[t] != StepType.FIRST
            returns += rw[t] * not_first
            lengths += not_first
            last = st[t] == StepType.LAST
            if last.any():
                idx = last.nonzero()[0]
                self._recent_returns.extend(returns[idx].tolist())
                self._recent_lengths.extend(lengths[idx].tolist())
                if self._track_finished:
                    self._finished.extend(zip(returns[idx].tolist(), lengths[idx].tolist()))
                self.num_episodes += len(idx)
                returns[idx] = 0.0
                lengths[idx] = 0
        self.num_env_steps += int(st.size)

    def pop_finished(self) -> List[Tuple[float, int]]:
        """``(return, length)`` of the episodes finished since the last call (an env
        worker ships them to the learner with each trajectory)."""
        out, self._finished = self._finished, []
        return out

    def add_finished(self, episodes: List[Tuple[float, int]], num_env_steps: int) -> None:
        """Account episodes finished elsewhere (an env worker) and the env steps taken."""
        for ret, length in episodes:
            self._recent_returns.append(float(ret))
            self._recent_lengths.append(int(length))
        self.num_episodes += len(episodes)
        self.num_env_steps += int(num_env_steps)

    def average_return(self) -> float:
        """Mean return of the last ``buffer_size`` completed episodes (nan if none)."""
        return (sum(self._recent_returns) / len(self._recent_returns)
                if self._recent_returns else float("nan"))

    def average_length(self) -> float:
        return (sum(self._recent_lengths) / len(self._recent_lengths)
                if self._recent_lengths else float("nan"))

    def recent_episodes(self) -> Tuple[List[float], List[int]]:
        """``(returns, lengths)`` of the episodes in the window (what the averages are of;
        data-parallel ranks pool them)."""
        return list(self._recent_returns), list(self._recent_lengths)

    def has_episodes(self) -> bool:
        return len(self._recent_returns) > 0

    def state_dict(self) -> dict:
        return {"recent_returns": list(self._recent_returns),
                "recent_lengths": list(self._recent_lengths),
                "num_episodes": self.num_episodes, "num_env_steps": self.num_env_steps}

    def load_state_dict(self, state: dict) -> None:
        self._recent_returns.clear()
        self._recent_returns.extend(state["recent_returns"])
        self._recent_lengths.clear()
        self._recent_lengths.extend(state["recent_lengths"])
        self.num_episodes = int(state["num_episodes"])
        self.num_env_steps = int(state["num_env_steps"])
