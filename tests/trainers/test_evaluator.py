"""``evaluate``: per-env quotas, the per-episode step cap and the ``on_step`` callback,
on a scripted env whose episode lengths are known."""
from typing import List

import pytest
import torch

from alf.algorithms.data_transformers import create_data_transformer
from alf.data_structures import AlgStep, StepType, TimeStep
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.trainers.evaluator import evaluate


class ScriptedEnv:
    """``B`` envs; env ``i``'s episodes last ``lengths[i]`` steps (None: never end).
    Reward 1 per step (so an episode's return equals its length); next-step autoreset."""

    def __init__(self, lengths: List):
        self.lengths = lengths
        self.batch_size = len(lengths)
        self.resets = 0
        self._t = [0] * self.batch_size

    def _ts(self, step_type: List[int]) -> TimeStep:
        b = self.batch_size
        st = torch.tensor(step_type, dtype=torch.int32)
        return TimeStep(step_type=st, reward=(st != StepType.FIRST).to(torch.float32),
                        discount=torch.ones(b), observation=torch.zeros(b, 1),
                        prev_action=torch.zeros(b, dtype=torch.int64),
                        env_id=torch.arange(b), env_info={})

    def reset(self) -> TimeStep:
        self.resets += 1
        self._t = [0] * self.batch_size
        return self._ts([StepType.FIRST] * self.batch_size)

    def step(self, action) -> TimeStep:
        types = []
        for i, n in enumerate(self.lengths):
            if n is not None and self._t[i] == n:  # the step after LAST starts anew
                self._t[i] = 0
                types.append(StepType.FIRST)
                continue
            self._t[i] += 1
            types.append(StepType.LAST if n is not None and self._t[i] == n else StepType.MID)
        return self._ts(types)


class ZeroPolicy(torch.nn.Module):
    action_spec = BoundedTensorSpec((), torch.int64, 0, 1)

    @property
    def device(self):
        return torch.device("cpu")

    def get_initial_predict_state(self, batch_size):
        return ()

    def predict_step(self, time_step, state):
        return AlgStep(output=torch.zeros(time_step.step_type.shape[0], dtype=torch.int64),
                       state=())


def _run(lengths, num_episodes, **kwargs):
    env = ScriptedEnv(lengths)
    transformer = create_data_transformer(None, TensorSpec((1,)))
    return env, evaluate(ZeroPolicy(), env, transformer, num_episodes, **kwargs)


def test_natural_episodes_fill_per_env_quotas():
    _, results = _run([2, 5], 4)
    # quota 2 per env, in order of completion: env 0 at t=2, t=5; env 1 at t=5, t=11
    assert results == [(2.0, 2), (2.0, 2), (5.0, 5), (5.0, 5)]


def test_cap_records_a_cut_episode_and_resets_when_nothing_else_can_come():
    seen = []
    env, results = _run([2, None], 4, max_episode_steps=5,
                        on_step=lambda l, r: seen.append((l.tolist(), r.tolist())))
    # env 0: 2-step episodes (quota 2); env 1 never ends: cut at 5, then the env is
    # reset (env 0 is over quota, env 1 abandoned) and env 1 is cut at 5 again
    assert results == [(2.0, 2), (2.0, 2), (5.0, 5), (5.0, 5)]
    assert env.resets == 2
    assert max(l[1] for l, _ in seen) == 5
    assert all(l[1] == r[1] for l, r in seen)  # return 1 per step
    assert seen[0] == ([0, 0], [0.0, 0.0])  # called at the first (reset) step too


def test_one_env_cut_at_the_cap():
    env, results = _run([None], 1, max_episode_steps=7)
    assert results == [(7.0, 7)] and env.resets == 1


def test_on_step_can_stop_evaluation():
    def stop(lengths, returns):
        if lengths[0] == 3:
            raise KeyboardInterrupt

    transformer = create_data_transformer(None, TensorSpec((1,)))
    transformer.train()
    with pytest.raises(KeyboardInterrupt):
        evaluate(ZeroPolicy(), ScriptedEnv([None]), transformer, 1, on_step=stop)
    assert transformer.training  # mode restored on the way out
