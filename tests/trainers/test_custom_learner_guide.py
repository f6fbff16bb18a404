"""A Learner of one's own (docs/writing_an_algorithm.md, "Where the loop lives, and
replacing it"): the guide's loop runs as printed, and the four pitfalls a user hit
writing one (issue 30) are fixed in the API:

- off-policy ``collect`` acts without autograd (collect, train, collect, train raised
  "Trying to backward through the graph a second time"); on-policy keeps the graph;
- ``Learner.sample`` is a preprocessed training batch whose per-sequence ``batch_info``
  ``[B]`` does not break ``preprocess_experience`` (PPO's raised IndexError);
- ``train_on_batch`` supplies ``train_step``'s state (recurrent PPO);
- ``collect`` returns the experience in every regime, ``last_collected_steps`` its steps.

The Dyna-Q code the guide shows is the example's, statement for statement (the example
is trained by tests/examples/test_dyna_dqn.py).
"""
import ast
import functools
import os
import re
import textwrap

import pytest
import torch

from alf import nest
from alf.algorithms.actor_critic_algorithm import ActorCriticAlgorithm
from alf.algorithms.dqn_algorithm import DqnAlgorithm
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.environments.factory import create_environment
from alf.networks import (ActorDistributionNetwork, ActorDistributionRNNNetwork, ValueNetwork,
                          ValueRNNNetwork)
from alf.networks.q_networks import QNetwork
from alf.trainers.learner import Learner
from alf.trainers.training_settings import TrainingSettings
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "writing_an_algorithm.md")
DYNA = os.path.join(REPO, "alf", "examples", "dyna_dqn.py")
FENCE = re.compile(r"^```python[ ]*\n(?P<body>.*?)^```[ ]*$", re.M | re.S)


def _doc_block(marker: str) -> str:
    blocks = [textwrap.dedent(m.group("body")) for m in FENCE.finditer(open(DOC).read())]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"{len(found)} python blocks of the guide hold {marker!r}"
    return found[0]


def _guide_learner():
    """The guide's ``TwoRoundLearner``, executed as printed."""
    namespace = {}
    exec(compile(_doc_block("class TwoRoundLearner(Learner)"), DOC, "exec"), namespace)
    return namespace["TwoRoundLearner"]


@pytest.fixture
def env():
    e = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    yield e
    e.close()


def _ppo(env, rnn=False, ctx=None):
    if rnn:
        actor = functools.partial(ActorDistributionRNNNetwork, input_fc_layer_params=(8,),
                                  lstm_hidden_size=8)
        value = functools.partial(ValueRNNNetwork, input_fc_layer_params=(8,), lstm_hidden_size=8)
    else:
        actor = functools.partial(ActorDistributionNetwork, fc_layer_params=(8,))
        value = functools.partial(ValueNetwork, fc_layer_params=(8,))
    return PPOAlgorithm(env.observation_spec(), env.action_spec(), actor_network_ctor=actor,
                        value_network_ctor=value, optimizer=Adam(lr=1e-3),
                        context=ctx or RunContext(num_iterations=4))


def _dqn(env):
    return DqnAlgorithm(env.observation_spec(), env.action_spec(),
                        q_network_ctor=functools.partial(QNetwork, fc_layer_params=(8,)),
                        optimizer=Adam(lr=1e-3), n_step=2, target_update_period=3,
                        context=RunContext(num_iterations=4))


PPO_SETTINGS = TrainingSettings(unroll_length=4, mini_batch_size=4, mini_batch_length=3,
                                num_updates_per_train_iter=2)


@pytest.mark.parametrize("kind", ["ppo", "rnn_ppo", "dqn"])
def test_the_guides_loop_runs_as_printed(env, kind):
    """Collect, train, collect, train per iteration, for a whole-buffer algorithm (PPO,
    also recurrent: train_step's state) and a transition learner with random initial
    collection (DQN)."""
    cls = _guide_learner()
    if kind == "dqn":
        alg = _dqn(env)
        settings = TrainingSettings(unroll_length=4, mini_batch_size=4, replay_buffer_length=32,
                                    initial_collect_steps=16, num_updates_per_train_iter=2)
    else:
        alg, settings = _ppo(env, rnn=kind == "rnn_ppo"), PPO_SETTINGS
    ctx = alg.context
    learner = cls.for_env(alg, env, settings)
    before = [p.detach().clone() for p in alg.parameters()]
    for _ in range(3):
        ctx.begin_iteration()
        assert learner.run_iteration() == 2 * 4 * 2  # two rounds of 4 steps x 2 envs
    assert ctx.env_steps == 48
    # DQN: the first round collects randomly (8 < 16 steps), then 5 rounds of 2 updates
    assert ctx.num_updates == (10 if kind == "dqn" else 12)
    assert any(not torch.equal(a, p) for a, p in zip(before, alg.parameters()))


def test_off_policy_collect_then_train_twice_needs_no_no_grad(env):
    """Failed before: collect stored PPO's rollout infos with their graph, and the second
    backward through a first-unroll step raised "Trying to backward through the graph a
    second time"."""
    alg = _ppo(env)
    learner = Learner.for_env(alg, env, TrainingSettings(unroll_length=4, mini_batch_size=8,
                                                         mini_batch_length=3))
    for _ in range(3):
        experience = learner.collect(4)
        assert not any(x.requires_grad for x in nest.flatten(experience))
        batch = learner.replay.gather()  # every stored step, each trained on every time
        alg.train_on_batch(alg.preprocess_experience(batch))
    assert alg.context.num_updates == 3


def test_on_policy_collect_keeps_the_graph(env):
    alg = ActorCriticAlgorithm(env.observation_spec(), env.action_spec(),
                               optimizer=Adam(lr=1e-3), context=RunContext(num_iterations=4))
    learner = Learner.for_env(alg, env, TrainingSettings(unroll_length=4))
    experience = learner.collect(4)
    assert experience.rollout_info.value.requires_grad
    assert learner.replay_buffer is None and learner.last_collected_steps == 8


def test_sample_goes_through_ppos_preprocess_experience(env):
    """Failed before: the documented sample's batch_info holds [B] tensors, and PPO's
    preprocess_experience maps x[:, :-1] over every field (IndexError)."""
    alg = _ppo(env)
    learner = Learner.for_env(alg, env, PPO_SETTINGS)
    learner.collect(4)
    batch = learner.sample()
    assert batch.step_type.shape == (4, 2)  # [B, L - 1]: the bootstrap step dropped
    assert batch.rollout_info.advantages.shape == (4, 2)
    assert batch.batch_info.env_ids.shape == (4,)  # kept, per sequence
    assert batch.batch_info.importance_weights.shape == (4,)
    loss_info, info = alg.train_on_batch(batch)
    assert info.step_type.shape == (2, 4) and alg.context.num_updates == 1


def test_sample_before_the_buffer_holds_a_sequence_is_one_line(env):
    alg = _ppo(env)
    learner = Learner.for_env(alg, env, PPO_SETTINGS)
    with pytest.raises(RuntimeError, match=r"^Learner.sample: the replay buffer holds 0 steps "
                                           r"per env, fewer than the 3 of a sequence"):
        learner.sample()


def test_off_policy_collect_returns_what_it_stored(env):
    """Failed before: collect returned None off-policy (and its steps were private)."""
    alg = _ppo(env)
    learner = Learner.for_env(alg, env, PPO_SETTINGS)
    experience = learner.collect(3)
    assert experience.step_type.shape == (3, 2) and learner.last_collected_steps == 6
    stored = learner.replay.gather()
    assert torch.equal(stored.time_step.observation, experience.time_step.observation.transpose(0, 1))


def _statements(fn):
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return [ast.dump(s) for s in body]


def _functions(tree):
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out.update({f"{node.name}.{f.name}": f for f in node.body
                        if isinstance(f, ast.FunctionDef)})
    return out


def test_the_dyna_code_the_guide_shows_is_the_examples():
    """The guide printed a DynaLearner that no test ran (it drifted from the example)."""
    real = _functions(ast.parse(open(DYNA).read()))
    learner = _functions(ast.parse(_doc_block("class DynaLearner(Learner)")))
    assert set(learner) == {f"DynaLearner.{n}" for n in (
        "train_iter", "model_step", "imagined_step", "_sample_transitions")}
    methods = ast.parse(_doc_block("# methods of DynaDqnAlgorithm"))
    shown = dict(learner, **{f"DynaDqnAlgorithm.{f.name}": f for f in methods.body
                             if isinstance(f, ast.FunctionDef)})
    assert {"DynaDqnAlgorithm.update_model", "DynaDqnAlgorithm.imagine"} <= set(shown)
    for name, fn in shown.items():
        assert _statements(fn) == _statements(real[name]), f"{name} differs from {DYNA}"
