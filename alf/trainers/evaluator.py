"""Greedy (or epsilon-greedy) evaluation on a separate environment with fair
per-env episode quotas and an optional per-episode step cap."""
import math
from typing import Callable, List, Optional, Tuple

import torch

from alf import nest as alf_nest

from alf.data_structures import StepType
from alf.tensor_specs import zeros_from_spec
from alf.utils.act_step import ActionOverride, ActStep
from alf.utils import precision

StepCallback = Callable[[torch.Tensor, torch.Tensor], None]


@torch.no_grad()
def evaluate(algorithm, env, data_transformer, num_episodes: int,
             epsilon_greedy: float = 0.0, max_steps: int = 10_000_000, *,
             max_episode_steps: int = 0,
             on_step: Optional[StepCallback] = None) -> List[Tuple[float, int]]:
    """Run ``predict_step`` for ``num_episodes`` episodes; returns ``[(return, length)]``.

    Each of the ``B`` envs contributes at most ``ceil(num_episodes / B)``
    episodes (so short episodes do not crowd out long ones, which would bias
    the average), taken in order of completion until ``num_episodes`` are done.
    Returns are raw env rewards (before any transformer).

    Args:
        algorithm: acts with ``predict_step`` (its greedy policy).
        env: a batched env of ``B`` envs; it is reset first.
        data_transformer: applied to each TimeStep (in eval mode) before acting.
        num_episodes: episodes to collect.
        epsilon_greedy: per env and step, the probability of replacing the
            action by a uniformly random one from the action spec. A greedy
            policy can get stuck (an Atari agent that never presses FIRE after
            losing a life waits until the 108k-frame limit); a small epsilon
            (0.01-0.05, the DQN evaluation protocol) un-sticks it.
        max_steps: a budget of vector-env steps for the whole call.
        max_episode_steps: > 0: an episode that reaches this many steps
            without ending is recorded as it stands (length
            ``max_episode_steps``) and abandoned: its env's later steps are not
            counted until its next episode starts, and when no env can still
            contribute (each is abandoned or has its quota) all are reset.
            0: no cap beyond the env's own.
        on_step: called once per vector-env step with the running episode
            lengths ``[B]`` (int64) and returns ``[B]`` (float64) (read only;
            0 right after an episode ended). It may raise (e.g.
            ``KeyboardInterrupt`` to stop early); the transformer's mode is
            restored either way.
    """
    batch = env.batch_size
    tally = _EpisodeTally(batch, num_episodes, max_episode_steps)
    was_training = data_transformer.training
    data_transformer.eval()
    try:
        device = algorithm.device
        to_device = (lambda n: n) if device.type == "cpu" else (
            lambda n: alf_nest.map_structure(lambda x: x.to(device), n))
        ts = to_device(env.reset())
        init_state = algorithm.get_initial_predict_state(batch)
        state = init_state
        tstate = zeros_from_spec(data_transformer.state_spec, batch, device=device)
        act = ActStep(data_transformer, algorithm.predict_step, init_state,
                      precision.act_dtype_of(algorithm))
        override = (_epsilon_greedy(algorithm.action_spec, epsilon_greedy, batch)
                    if epsilon_greedy > 0 else None)
        for _ in range(max_steps):
            tally.observe(ts.step_type.cpu(), ts.reward.cpu())
            if on_step is not None:
                on_step(tally.lengths, tally.returns)
            if tally.complete():
                break
            if tally.stuck():  # nothing more can come from the current episodes: new ones
                ts = to_device(env.reset())
                state = init_state
                tstate = zeros_from_spec(data_transformer.state_spec, batch, device=device)
                tally.restart()
                continue
            acted = act(ts, state, tstate, override)
            state, tstate = acted.alg_step.state, acted.transformer_state
            ts = to_device(env.step(acted.action))
    finally:
        data_transformer.train(was_training)
    return tally.results


def _epsilon_greedy(action_spec, epsilon: float, batch: int) -> ActionOverride:
    """The action override of epsilon-greedy evaluation: per env, with probability
    ``epsilon``, a uniform sample of ``action_spec`` instead of the policy's action
    ``[B, ...]`` (draws ``B`` actions, then ``B`` uniforms, from torch's global stream)."""
    def override(step) -> torch.Tensor:
        action = step.output
        random_action = action_spec.sample((batch,)).to(action.device)
        mask = torch.rand(batch, device=action.device) < epsilon
        return torch.where(mask.reshape((batch,) + (1,) * (action.ndim - 1)),
                           random_action.to(action.dtype), action)

    return override


class _EpisodeTally:
    """Running returns ``[B]`` (float64) and lengths ``[B]`` (int64) of ``B`` envs, and the
    finished episodes, each env at most ``ceil(num_episodes / B)`` of them (see
    :func:`evaluate` for ``max_episode_steps``)."""

    def __init__(self, batch: int, num_episodes: int, max_episode_steps: int):
        self.quota = math.ceil(num_episodes / batch)
        self.num_episodes = num_episodes
        self.max_episode_steps = max_episode_steps
        self.done_per_env = [0] * batch
        self.abandoned = [False] * batch
        self.results: List[Tuple[float, int]] = []
        self.returns = torch.zeros(batch, dtype=torch.float64)
        self.lengths = torch.zeros(batch, dtype=torch.int64)

    def observe(self, step_type: torch.Tensor, reward: torch.Tensor) -> None:
        """Count one vector-env step (``[B]`` step types, rewards ``[B, ...]``)."""
        batch = step_type.shape[0]
        first = step_type == StepType.FIRST
        last = step_type == StepType.LAST
        self.returns += torch.where(first, 0.0,
                                    reward.to(torch.float64).reshape(batch, -1).sum(1))
        self.lengths += (~first).to(torch.int64)
        for i in last.nonzero().flatten().tolist():
            if self.abandoned[i]:
                self.abandoned[i] = False  # its next episode counts again
                continue
            self._record(i)
        if self.max_episode_steps > 0:
            capped = (self.lengths >= self.max_episode_steps) & ~last
            for i in capped.nonzero().flatten().tolist():
                if not self.abandoned[i]:
                    self._record(i)
                    self.abandoned[i] = True
        self.returns[last] = 0.0
        self.lengths[last] = 0

    def _record(self, i: int) -> None:
        """Append env ``i``'s episode if its quota and the total allow it; count it
        either way."""
        if self.done_per_env[i] < self.quota and len(self.results) < self.num_episodes:
            self.results.append((float(self.returns[i]), int(self.lengths[i])))
        self.done_per_env[i] += 1

    def complete(self) -> bool:
        return len(self.results) >= self.num_episodes

    def stuck(self) -> bool:
        """Every env is abandoned (capped) or has its quota: only new episodes can add."""
        return self.max_episode_steps > 0 and all(
            a or d >= self.quota for a, d in zip(self.abandoned, self.done_per_env))

    def restart(self) -> None:
        """The envs were reset: running episodes start over."""
        self.returns.zero_()
        self.lengths.zero_()
        self.abandoned = [False] * len(self.abandoned)
