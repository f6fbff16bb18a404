"""Greedy evaluation on a separate environment with fair per-env episode quotas."""
import math
from typing import List, Tuple

import torch

from alf import nest as alf_nest

from alf.data_structures import StepType
from alf.tensor_specs import zeros_from_spec
from alf.utils.tensor_utils import reset_state_if_necessary


@torch.no_grad()
def evaluate(algorithm, env, data_transformer, num_episodes: int,
             epsilon_greedy: float = 0.0, max_steps: int = 10_000_000) -> List[Tuple[float, int]]:
    """Run ``predict_step`` for ``num_episodes`` episodes; returns ``[(return, length)]``.

    Each of the ``B`` envs contributes at most ``ceil(num_episodes / B)``
    episodes (so short episodes do not crowd out long ones, which would bias
    the average), taken in order of completion until ``num_episodes`` are done.
    Returns are raw env rewards (before any transformer).
    """
    batch = env.batch_size
    quota = math.ceil(num_episodes / batch)
    done_per_env = [0] * batch
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
        action_spec = algorithm.action_spec
        for _ in range(max_steps):
            step_type, reward = ts.step_type.cpu(), ts.reward.cpu()
            first = step_type == StepType.FIRST
            returns += torch.where(first, 0.0, reward.to(torch.float64).reshape(batch, -1).sum(1))
            lengths += (~first).to(torch.int64)
            for i in (step_type == StepType.LAST).nonzero().flatten().tolist():
                if done_per_env[i] < quota and len(results) < num_episodes:
                    results.append((float(returns[i]), int(lengths[i])))
                done_per_env[i] += 1
            returns[step_type == StepType.LAST] = 0.0
            lengths[step_type == StepType.LAST] = 0
            if len(results) >= num_episodes:
                break
            tts, tstate = data_transformer.transform_timestep(ts, tstate)
            state = reset_state_if_necessary(state, init_state, tts.is_first())
            step = algorithm.predict_step(tts, state)
            action = step.output
            if epsilon_greedy > 0:
                random_action = action_spec.sample((batch,)).to(action.device)
                mask = torch.rand(batch, device=action.device) < epsilon_greedy
                action = torch.where(mask.reshape((batch,) + (1,) * (action.ndim - 1)),
                                     random_action.to(action.dtype), action)
            state = step.state
            ts = to_device(env.step(action))
    finally:
        data_transformer.train(was_training)
    return results
