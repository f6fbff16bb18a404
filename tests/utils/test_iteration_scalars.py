"""Once-per-iteration summaries (issue 30): ``RunContext.should_summarize()`` is true for
every mini-batch of a summarised iteration, so a scalar written under it from
``calc_loss`` got one point per mini-batch; ``RunContext.add_iteration_scalar`` writes one
per iteration (the mean, or the last), flushed by the Learner. The ``calc_loss`` of
docs/writing_an_algorithm.md ("Summaries") runs as printed."""
import os
import re
import textwrap
from collections import defaultdict
from typing import Any, NamedTuple

import pytest
import torch

from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.data_structures import AlgStep
from alf.environments.factory import create_environment
from alf.trainers.learner import Learner
from alf.trainers.training_settings import TrainingSettings
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "docs", "writing_an_algorithm.md")
UPDATES = 5


class RecordingWriter:
    """Stands in for the SummaryWriter: ``points[tag]`` is ``[(step, value), ...]``."""

    def __init__(self):
        self.points = defaultdict(list)

    def add_scalar(self, tag, value, step):
        self.points[tag].append((step, value))


def _doc_calc_loss():
    text = open(DOC).read()
    blocks = [textwrap.dedent(m.group(1)) for m in
              re.finditer(r"^```python[ ]*\n(.*?)^```[ ]*$", text, re.M | re.S)]
    (block,) = [b for b in blocks if "add_iteration_scalar" in b]
    namespace = {}
    exec(compile(block, DOC, "exec"), namespace)
    return namespace["calc_loss"]


class TdInfoAlgorithm(RLAlgorithm):
    """Off-policy, random actions; regresses V(obs) on the reward, its train info a
    ``td_error``; ``calc_loss`` is the guide's."""

    def __init__(self, observation_spec, action_spec, **kwargs):
        super().__init__(observation_spec, action_spec, **kwargs)
        self.v = torch.nn.Linear(4, 1)
        self.td_errors = []  # each mini-batch's mean |td_error|

    def rollout_step(self, time_step, state):
        return AlgStep(output=self.action_spec.sample(time_step.step_type.shape), state=state,
                       info=())

    def train_step(self, experience, state, rollout_info):
        td = self.v(experience.observation).squeeze(-1) - experience.reward
        if self.context.should_summarize():
            self.td_errors.append(float(td.detach().abs().mean()))
        return AlgStep(output=(), state=state, info=_Info(td_error=td))

    calc_loss = _doc_calc_loss()


class _Info(NamedTuple):
    td_error: Any = ()


@pytest.fixture
def env():
    e = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    yield e
    e.close()


def test_a_calc_loss_scalar_is_one_point_per_summarised_iteration(env):
    """Failed before (no add_iteration_scalar): the per-mini-batch add_scalar it sits next
    to writes UPDATES points per summarised iteration; it writes one, their mean."""
    writer = RecordingWriter()
    ctx = RunContext(num_iterations=6, summary_writer=writer, summary_interval=3)
    alg = TdInfoAlgorithm(env.observation_spec(), env.action_spec(), context=ctx,
                          optimizer=Adam(lr=1e-3), name="Td")
    learner = Learner.for_env(alg, env, TrainingSettings(
        unroll_length=4, mini_batch_size=4, replay_buffer_length=32,
        num_updates_per_train_iter=UPDATES))
    summarised = []
    for _ in range(6):
        ctx.begin_iteration()
        alg.td_errors = []
        learner.run_iteration()
        if ctx.should_summarize():
            summarised.append((ctx.iteration, sum(alg.td_errors) / len(alg.td_errors)))
    assert [i for i, _ in summarised] == [1, 3, 6]
    once = writer.points["TD/Td/abs_td_error"]
    assert [step for step, _ in once] == [1, 3, 6]
    for (step, value), (_, mean) in zip(once, summarised):
        assert value == pytest.approx(mean, rel=1e-5)
    vs_steps = writer.points["TD/Td_vs_EnvironmentSteps/abs_td_error"]
    assert [step for step, _ in vs_steps] == [8, 24, 48]  # env steps at the iteration
    per_batch = writer.points["TD/Td/max_abs_td_error"]  # the per-mini-batch way
    assert [step for step, _ in per_batch] == [1] * UPDATES + [3] * UPDATES + [6] * UPDATES


def test_reduce_last_pinned_iterations_and_a_hand_driven_loop():
    writer = RecordingWriter()
    ctx = RunContext(summary_writer=writer, summary_interval=2, summarize_first_interval=False)
    ctx.begin_iteration()  # 1: not summarised, the value is not even read
    ctx.add_iteration_scalar("A/x", object())
    ctx.flush_iteration_scalars()
    assert not writer.points
    ctx.begin_iteration()  # 2
    for v in (1.0, 2.0, torch.tensor(6.0)):
        ctx.add_iteration_scalar("A/mean", v)
        ctx.add_iteration_scalar("A/last", v, reduce="last")
    with ctx.pinned_iteration(7, due=True):  # a learner thread training iteration 7's unroll
        ctx.add_iteration_scalar("A/mean", 10.0)
    ctx.flush_iteration_scalars()
    assert writer.points["A/mean"] == [(2, 3.0), (7, 10.0)]
    assert writer.points["A/last"] == [(2, 6.0)]
    ctx.begin_iteration()
    ctx.begin_iteration()  # 4, driven by hand without a flush: iteration 6 writes 4's
    ctx.add_iteration_scalar("A/mean", 4.0)
    ctx.begin_iteration()
    ctx.begin_iteration()
    ctx.add_iteration_scalar("A/mean", 8.0)
    assert writer.points["A/mean"][2:] == [(4, 4.0)]
    with pytest.raises(ValueError, match=r"add_iteration_scalar\('A/x'\): reduce must be "
                                         r"'mean' or 'last', got 'max'"):
        ctx.add_iteration_scalar("A/x", 1.0, reduce="max")
