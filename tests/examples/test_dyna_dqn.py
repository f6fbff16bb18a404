"""The Dyna-Q example (alf/examples/dyna_dqn.py): an algorithm with a loop of its own,
trained by the real Trainer from ``dyna_dqn_cart_pole.gin`` (a few hundred CartPole steps).

- the Trainer builds the ``learner_class`` the algorithm declares (``DynaLearner``);
  a ``learner_class`` that is not a Learner, or ``learner_thread=True`` (whose thread
  would never call ``DynaLearner.train_iter``), is one ConfigError;
- the model learns: its loss on CartPole transitions falls; its losses are summarised
  as ``Loss/DynaDqnAlgorithm/model_*``;
- the counters add up: ``num_updates`` = real + imagined Q updates, exactly (model steps
  are counted by the model, not as Q updates);
- a model step moves only the model, a Q step (real or imagined) only the Q network,
  although ``update_with_gradient`` steps every optimizer (Adam skips a parameter
  without a gradient, moments included);
- resuming restores the model, its optimizer and its counters, and training continues.
"""
import os

import gin
import pytest
import torch

from alf import config as alf_config
from alf.errors import ConfigError
from alf.examples.dyna_dqn import DynaDqnAlgorithm, DynaLearner
from alf.trainers.checkpointer import Checkpointer

STEPS, UNROLL, INITIAL = 320, 16, 64  # 20 iterations, training from the 4th
REAL, MODEL, IMAGINED = 4, 8, 4       # updates per training iteration
SMALL = [
    f"TrainerConfig.num_env_steps = {STEPS}",
    f"TrainerConfig.unroll_length = {UNROLL}",
    f"TrainerConfig.initial_collect_steps = {INITIAL}",
    f"TrainerConfig.num_updates_per_train_iter = {REAL}",
    f"DynaDqnAlgorithm.model_updates = {MODEL}",
    f"DynaDqnAlgorithm.imagined_updates = {IMAGINED}",
    "TrainerConfig.mini_batch_size = 32",
    "TrainerConfig.replay_buffer_length = 1000",
    "QNetwork.fc_layer_params = (32,)",
    "DynaDqnAlgorithm.model_fc_layer_params = (32,)",
    "DynaDqnAlgorithm.target_update_period = 10",
    "TrainerConfig.evaluate = False",
    "TrainerConfig.summary_interval = 1",
    "TrainerConfig.checkpoint_interval = 100000",
]


def _trained_iterations(env_steps: int) -> int:
    """Iterations that trained (env steps after the unroll >= initial_collect_steps)."""
    return sum(1 for i in range(1, env_steps // UNROLL + 1) if i * UNROLL >= INITIAL)


def _trainer(root_dir, params=()):
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    gin.clear_config()
    alf_config.parse_config(conf_file="dyna_dqn_cart_pole.gin", conf_params=SMALL + list(params))
    return Trainer(TrainerConfig(), str(root_dir), config_text=alf_config.config_text(),
                   quiet=True)


def _state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _weights(module):
    return {k: p.detach().clone() for k, p in module.named_parameters()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(trainer, root_dir, the model's state before training), after a short run."""
    root = tmp_path_factory.mktemp("dyna") / "run"
    trainer = _trainer(root)
    initial_model = _state(trainer.algorithm.model)
    trainer.run()
    yield trainer, root, initial_model
    gin.clear_config()


def test_trainer_uses_the_declared_learner_and_counts_updates(trained):
    trainer, _, _ = trained
    assert type(trainer.learner) is DynaLearner
    alg, ctx = trainer.algorithm, trainer.context
    assert isinstance(alg, DynaDqnAlgorithm) and ctx.env_steps == STEPS
    n = _trained_iterations(STEPS)
    assert n == 17
    assert int(alg.model.num_updates) == n * MODEL
    assert int(alg.model.num_imagined_updates) == n * IMAGINED
    assert ctx.num_updates == n * REAL + n * IMAGINED  # model steps are not Q updates


def test_model_losses_are_summarised(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    _, root, _ = trained
    events = EventAccumulator(str(root), size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    for name in ("model_loss", "model_observation_mse", "model_reward_mse",
                 "model_termination_bce"):
        assert f"Loss/DynaDqnAlgorithm/{name}" in tags, tags
    assert "Loss/DynaDqnAlgorithm/td_error" in tags  # the Q updates' own


def test_the_model_loss_falls_on_cart_pole_transitions(trained):
    trainer, _, initial_model = trained
    alg, learner = trainer.algorithm, trainer.learner
    torch.manual_seed(0)
    real = learner._sample_transitions()  # 32 real CartPole transitions
    trained_model = _state(alg.model)

    def loss(model_state):
        alg.model.load_state_dict(model_state)
        with torch.no_grad():
            return float((alg.model_loss(real)[0] * real.valid).sum() / real.valid.sum())

    before, after = loss(initial_model), loss(trained_model)
    assert after < 0.5 * before, (before, after)


def test_model_and_q_steps_move_only_their_own_network(trained):
    trainer, _, _ = trained
    alg, learner = trainer.algorithm, trainer.learner
    q, model = alg._q_network, alg.model
    # After training, Adam's moments are non-zero: an optimizer that stepped a parameter
    # without a gradient (as a zero gradient) would still move it.
    q0, model0 = _weights(q), _weights(model)
    learner.model_step()
    assert _same(_weights(q), q0), "a model step moved the Q network"
    assert not _same(_weights(model), model0)

    for q_step in (learner.imagined_step, learner.train_from_replay):  # imagined, real
        q0, model0 = _weights(q), _weights(model)
        q_step()
        assert not _same(_weights(q), q0)
        assert _same(_weights(model), model0), f"{q_step.__name__} moved the model"


def test_resume_restores_the_model_and_its_optimizer(trained):
    trainer, root, _ = trained
    _, saved, _ = Checkpointer(str(root / "train")).load_latest()
    model_keys = [k for k in saved["algorithm"] if k.startswith("model.")]
    assert {"model.out.weight", "model.num_updates"} <= set(model_keys)
    # the algorithm's optimizers: the Q network's (default) and the model's (added)
    saved_opts = saved["algorithm"]["_extra_state"]["optimizers"]
    assert len(saved_opts) == 2 and all(o["state"] for o in saved_opts)

    second = _trainer(root, [f"TrainerConfig.num_env_steps = {STEPS + 160}",
                             "TrainerConfig.random_seed = 123"])
    assert second.restore_checkpoint()
    alg = second.algorithm
    for k in model_keys:
        assert torch.equal(alg.state_dict()[k], saved["algorithm"][k]), k
    for opt, saved_opt in zip(alg.optimizers(), saved_opts):
        for i, s in saved_opt["state"].items():
            assert torch.equal(opt.state_dict()["state"][i]["exp_avg"], s["exp_avg"])
    second.run()
    n = _trained_iterations(STEPS + 160)
    assert second.context.env_steps == STEPS + 160
    assert int(alg.model.num_updates) == n * MODEL
    assert second.context.num_updates == n * (REAL + IMAGINED)


class _NotALearner:
    pass


class _BadLearnerDqn(DynaDqnAlgorithm):
    learner_class = _NotALearner


@pytest.mark.parametrize("setting, match", [
    ("learner_class", "learner_class must be a subclass of alf.trainers.learner.Learner"),
    ("learner_thread", "TrainerConfig.learner_thread=True"),
])
def test_settings_that_would_skip_the_dyna_loop_are_one_config_error(tmp_path, setting, match):
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    gin.clear_config()
    alf_config.parse_config(conf_file="dyna_dqn_cart_pole.gin", conf_params=SMALL)
    config = TrainerConfig()
    if setting == "learner_class":
        config.algorithm_ctor = _BadLearnerDqn
    else:
        config.learner_thread = True
    try:
        with pytest.raises(ConfigError, match=match):
            Trainer(config, str(tmp_path / "run"), quiet=True)
        assert not os.path.exists(tmp_path / "run")  # nothing written
    finally:
        gin.clear_config()


def test_the_doc_shows_the_example_code():
    """docs/writing_an_algorithm.md's DynaLearner and DynaDqnAlgorithm methods are this
    example's, statement for statement (docstrings, comments and type hints aside)."""
    import ast
    import re
    import textwrap
    import alf.examples.dyna_dqn as example
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(repo, "docs", "writing_an_algorithm.md")) as f:
        doc = f.read()
    snippets = [ast.parse(textwrap.dedent(m.group(1)))
                for m in re.finditer(r"^```python\n(.*?)^```$", doc, re.M | re.S)]
    source = ast.parse(open(example.__file__).read())
    classes = {n.name: n for n in source.body if isinstance(n, ast.ClassDef)}

    def body(fn):
        stmts = fn.body
        if isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant):
            stmts = stmts[1:]  # the docstring
        return [ast.dump(s) for s in stmts] + [a.arg for a in fn.args.args]

    def methods(cls):
        return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}

    shown = {}
    for tree in snippets:
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "DynaLearner":
                shown.update(methods(node))
            elif isinstance(node, ast.FunctionDef) and node.name in ("update_model", "imagine"):
                shown[node.name] = node
    real = {**methods(classes["DynaLearner"]), **methods(classes["DynaDqnAlgorithm"])}
    assert set(shown) >= {"train_iter", "model_step", "imagined_step", "update_model",
                          "imagine"}
    for name, fn in shown.items():
        assert body(fn) == body(real[name]), f"{name} differs from alf/examples/dyna_dqn.py"
