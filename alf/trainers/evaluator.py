"""Greedy (or epsilon-greedy) evaluation on a separate environment with fair
per-env episode quotas and an optional per-episode step cap."""
import math
from typing import Callable, List, Optional, Tuple

import torch

from alf import nest as alf_nest

from alf.data_structures import StepType
from alf.tensor_specs import zeros_from_spec
from alf.utils.act_step import ActionOverride, ActStep

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
    quota = math.ceil(num_episodes / batch)
    done_per_env = [0] * batch
    abandoned = [False] * batch
    results: List[Tuple[float, int]] = []
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
        returns = torch.zeros(batch, dtype=torch.float64)
        lengths = torch.zeros(batch, dtype=torch.int64)
        act = ActStep(data_transformer, algorithm.predict_step, init_state)
        override = (_epsilon_greedy(algorithm.action_spec, epsilon_greedy, batch)
                    if epsilon_greedy > 0 else None)
        for _ in range(max_steps):
            step_type, reward = ts.step_type.cpu(), ts.reward.cpu()
            first = step_type == StepType.FIRST
            last = step_type == StepType.LAST
            returns += torch.where(first, 0.0, reward.to(torch.float64).reshape(batch, -1).sum(1))
            lengths += (~first).to(torch.int64)
            for i in last.nonzero().flatten().tolist():
                if abandoned[i]:
                    abandoned[i] = False  # its next episode counts again
                    continue
                _record(results, done_per_env, i, quota, num_episodes, returns, lengths)
            if max_episode_steps > 0:
                capped = (lengths >= max_episode_steps) & ~last
                for i in capped.nonzero().flatten().tolist():
                    if not abandoned[i]:
                        _record(results, done_per_env, i, quota, num_episodes, returns, lengths)
                        abandoned[i] = True
            returns[last] = 0.0
            lengths[last] = 0
            if on_step is not None:
                on_step(lengths, returns)
            if len(results) >= num_episodes:
                break
            if max_episode_steps > 0 and all(a or d >= quota
                                             for a, d in zip(abandoned, done_per_env)):
                # nothing more can come from the current episodes: start new ones
                ts = to_device(env.reset())
                state = init_state
                tstate = zeros_from_spec(data_transformer.state_spec, batch, device=device)
                returns.zero_()
                lengths.zero_()
                abandoned = [False] * batch
                continue
            acted = act(ts, state, tstate, override)
            state, tstate = acted.alg_step.state, acted.transformer_state
            ts = to_device(env.step(acted.action))
    finally:
        data_transformer.train(was_training)
    return results


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


def _record(results: List[Tuple[float, int]], done_per_env: List[int], i: int, quota: int,
            num_episodes: int, returns: torch.Tensor, lengths: torch.Tensor) -> None:
    """Append env ``i``'s episode if its quota and the total allow it; count it either way."""
    if done_per_env[i] < quota and len(results) < num_episodes:
        results.append((float(returns[i]), int(lengths[i])))
    done_per_env[i] += 1
