"""The "writing an algorithm" example (alf/examples/reinforce_algorithm.py) works end to end.

- the loss is the known REINFORCE quantity on a hand-made unroll;
- ``reinforce_cart_pole.gin`` resolves by bare name and its ``import`` statement
  registers ``ReinforceAlgorithm`` (and survives into the saved config text);
- a short in-process training run on CartPole learns: random play averages
  ~22, and this budget (40k env steps, ~5 s) reached an average training
  return of 308-423 over seeds 0-4 when the threshold below was chosen;
- ``alf.bin.play`` in a fresh process rebuilds the agent from the run's
  saved ``config.gin`` and checkpoint;
- the user docs name every ``TrainerConfig`` field and bundled example (a
  drift check for README.md / docs/configuration.md, which live with this example).
"""
import os
import subprocess
import sys

import gin
import pytest
import torch

from alf import config as alf_config
from alf.data_structures import StepType
from alf.examples.reinforce_algorithm import ReinforceAlgorithm, ReinforceInfo
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = "reinforce_cart_pole.gin"
RANDOM_POLICY_RETURN = 22.0
LEARNED_THRESHOLD = 100.0  # measured minimum over 5 seeds: 308


@pytest.fixture
def fresh_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def _algorithm(**kwargs) -> ReinforceAlgorithm:
    return ReinforceAlgorithm(observation_spec=TensorSpec((4,)),
                              action_spec=BoundedTensorSpec((), torch.int64, 0, 1), **kwargs)


def _info(step_types, rewards, discounts):
    """``[T, 1]`` info with ``log_prob`` a leaf tensor so its gradient is the loss weight."""
    t = lambda x, dtype=torch.float32: torch.tensor(x, dtype=dtype)[:, None]  # noqa: E731
    log_prob = torch.zeros(len(step_types), 1, requires_grad=True)
    return ReinforceInfo(step_type=t(step_types, torch.int32), reward=t(rewards),
                         discount=t(discounts), log_prob=log_prob), log_prob


def test_calc_loss_weights_log_probs_by_monte_carlo_returns(fresh_gin):
    # Episode A: F M L (terminated), then episode B starts and is cut by the unroll end.
    info, log_prob = _info(step_types=[F, M, L, F, M, M], rewards=[0, 1, 1, 0, 1, 1],
                           discounts=[1, 1, 0, 1, 1, 1])
    gamma = 0.5
    alg = _algorithm(gamma=gamma, normalize_returns=False, mask_incomplete_episodes=False)
    loss_info = alg.calc_loss(info)
    # G[t] = r[t+1] + gamma * d[t+1] * G[t+1]; 0 at LAST and after the last step.
    expected_returns = torch.tensor([1 + gamma * 1, 1, 0, 1 + gamma * 1, 1])
    valid = torch.tensor([1., 1., 0., 1., 1.])  # the LAST step's action is ignored by the env
    assert loss_info.loss.shape == (5, 1)
    loss_info.loss.mean().backward()
    # d(loss)/d(log_prob[t]) = -G[t] * valid[t] / num_valid; the final step has no loss.
    expected_grad = torch.cat([-expected_returns * valid / valid.sum(), torch.zeros(1)])
    torch.testing.assert_close(log_prob.grad[:, 0], expected_grad)
    torch.testing.assert_close(loss_info.extra.mean_return,
                               (expected_returns * valid).sum() / valid.sum())

    # With mask_incomplete_episodes, episode B (no LAST before the unroll ends) is dropped.
    info, log_prob = _info([F, M, L, F, M, M], [0, 1, 1, 0, 1, 1], [1, 1, 0, 1, 1, 1])
    alg = _algorithm(gamma=gamma, normalize_returns=False, mask_incomplete_episodes=True)
    alg.calc_loss(info).loss.mean().backward()
    torch.testing.assert_close(log_prob.grad[:, 0],
                               torch.tensor([-1.5 / 2, -1.0 / 2, 0, 0, 0, 0]))


@pytest.mark.parametrize("setting, match", [
    (dict(initial_collect_steps=100), "initial_collect_steps"),  # random actions: wrong log_probs
    (dict(unroll_length=1), "unroll_length"),  # a return needs the rewards after a step
])
def test_incompatible_trainer_settings_fail_before_training(fresh_gin, setting, match):
    """Building the algorithm and its Learner the way the Trainer does refuses them."""
    from alf.environments.factory import create_environment
    from alf.errors import ConfigError
    from alf.experiment import EnvSpecs, build_algorithm
    from alf.trainers.trainer_config import TrainerConfig
    from tests.learner_helpers import learner_for
    config = TrainerConfig(algorithm_ctor=ReinforceAlgorithm, num_env_steps=10, **setting)
    env = create_environment("CartPole-v1", 1, backend="vector", seed=0)
    try:
        with pytest.raises(ConfigError, match=match):
            learner_for(build_algorithm(config, EnvSpecs.of(env), "learner"), env, config)
    finally:
        env.close()


def test_gin_file_resolves_and_parses(fresh_gin, tmp_path, monkeypatch):
    from alf.trainers.trainer_config import TrainerConfig
    monkeypatch.chdir(tmp_path)  # bare names must resolve from alf/examples, from any cwd
    path = alf_config.resolve_conf_file(CONF)
    assert path == os.path.join(alf_config.EXAMPLES_DIR, CONF)
    alf_config.parse_config(conf_file=CONF)
    config = TrainerConfig()
    assert config.algorithm_ctor is ReinforceAlgorithm
    assert config.unroll_length == 256
    # The saved config (root_dir/config.gin, reused on resume and by alf.bin.play)
    # must carry the import, or a fresh process could not resolve @ReinforceAlgorithm.
    assert "import alf.examples.reinforce_algorithm" in alf_config.config_text()


def test_reinforce_learns_cart_pole_and_plays_from_a_fresh_process(fresh_gin, tmp_path):
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    alf_config.parse_config(conf_file=CONF, conf_params=[
        "TrainerConfig.num_env_steps = 40000",
        "TrainerConfig.random_seed = 0",
        "TrainerConfig.evaluate = False",
        "TrainerConfig.checkpoint_interval = 100000",
    ])
    root_dir = tmp_path / "run"
    trainer = Trainer(TrainerConfig(), str(root_dir), config_text=alf_config.config_text(),
                      quiet=True)
    trainer.run()
    average_return = trainer.learner.metrics.average_return()
    assert trainer.context.env_steps >= 40000
    assert average_return > LEARNED_THRESHOLD, (
        f"REINFORCE averaged {average_return:.1f} over its last episodes after 40k env steps "
        f"(random play: ~{RANDOM_POLICY_RETURN:.0f}; seeds 0-4 measured 308-423)")

    # A fresh process rebuilds the algorithm from root_dir/config.gin alone: the saved
    # `import alf.examples.reinforce_algorithm` is what makes @ReinforceAlgorithm resolvable.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO_ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    done = subprocess.run([sys.executable, "-m", "alf.bin.play", f"--root_dir={root_dir}",
                           "--num_episodes=1"], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "average return over 1 episode:" in done.stdout


def test_docs_name_every_trainer_config_field_and_example():
    """The user docs list what the code offers (they drift as fields and examples are added)."""
    import inspect
    from alf.trainers.trainer_config import TrainerConfig
    with open(os.path.join(REPO_ROOT, "docs", "configuration.md")) as f:
        configuration = f.read()
    fields = [n for n in inspect.signature(TrainerConfig.__init__).parameters if n != "self"]
    missing = [n for n in fields if f"| `{n}` |" not in configuration]
    assert not missing, f"docs/configuration.md: TrainerConfig table lacks {missing}"
    with open(os.path.join(REPO_ROOT, "README.md")) as f:
        readme = f.read()
    examples = sorted(f for f in os.listdir(alf_config.EXAMPLES_DIR) if f.endswith(".gin"))
    missing = [e for e in examples if f"`{e}`" not in readme]
    assert not missing, f"README.md: bundled examples list lacks {missing}"
