"""A user's own env is checked once before anything is written, and its values while it
runs (issue 41, item 3).

Eight mistakes gave a 63-75-line traceback from numpy or gymnasium internals (exit 1,
never naming the env) and left ``config.gin`` behind, so that a rerun "resumed" the
failed start; a NaN observation or reward was trained on silently (exit 0). Each now is
one line: exit 2 with nothing written (the start-up check), or exit 1 naming the env, its
index and step (during the run). The env module is written next to the gin file and
imported there, as a user would.
"""
import os

import pytest

from onb_env_source import ONB_ENV

CONF = """
import onb_env
include 'ppo_cart_pole.gin'
create_environment.env_name = 'OnbBad-v0'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.random_seed = 1
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 2
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.evaluate = False
TrainerConfig.checkpoint_interval = 1000
"""

ENV = "Environment 'OnbBad-v0'"


def _train(alf_cli, tmp_path, params=()):
    (tmp_path / "onb_env.py").write_text(ONB_ENV)
    conf = alf_cli.write_gin(tmp_path, CONF, "onb.gin")
    root = tmp_path / "run"
    args = ["--conf", conf, "--root_dir", str(root)]
    for p in params:
        args += ["--conf_param", p]
    return alf_cli.run("alf.bin.train", args, tmp_path), root


def _one_line(result, status):
    """The error line; before the run it is all of stderr, during it the only error line
    (the run's own start-up lines, e.g. the replay buffer's size, come before it)."""
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    if status == 1:
        lines = [l for l in lines if "error" in l.lower()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("alf.bin.train: error: "), lines
    return lines[0][len("alf.bin.train: error: "):]


def _mistake(alf_cli, tmp_path, mistake, env="OnbBad-v0"):
    result, root = _train(alf_cli, tmp_path, [
        f"create_environment.env_name='{env}'",
        f"create_environment.env_kwargs={{'mistake': '{mistake}'}}" if mistake else
        "create_environment.env_kwargs=None"])
    message = _one_line(result, 2)
    assert not root.exists(), os.listdir(root)  # no config.gin: a rerun starts afresh
    return message


@pytest.mark.parametrize("mistake,expected", [
    ("reset_shape", [ENV, "reset() returned an observation of shape (3,)",
                     "observation_space Box(-1.0, 1.0, (4,), float32)", "shape (4,)"]),
    ("step_shape", [ENV, "step() returned an observation of shape (2, 2)",
                    "observation_space Box(-1.0, 1.0, (4,), float32)", "shape (4,)"]),
    ("old_step", [ENV, "step() returned 4 values", "(obs, reward, terminated, truncated, info)",
                  "split done into terminated and truncated"]),
    ("old_reset", [ENV, "reset() returned ndarray, not a tuple (obs, info)",
                   "return obs, {}"]),
    ("reward_array", [ENV, "step() returned a reward of shape (2,)", "no reward_space",
                      "return a float", "self.reward_space = gym.spaces.Box"]),
])
def test_a_wrong_return_is_one_line_naming_env_and_space(alf_cli, tmp_path, mistake,
                                                         expected):
    message = _mistake(alf_cli, tmp_path, mistake)
    assert message.startswith(ENV + ": "), message
    for part in expected:
        assert part in message, (part, message)


def test_dict_key_mismatch_names_the_keys(alf_cli, tmp_path):
    message = _mistake(alf_cli, tmp_path, "", env="OnbDict-v0")
    assert message.startswith("Environment 'OnbDict-v0': reset() returned an observation "
                              "with keys ['pos', 'speed']"), message
    assert "observation_space is a Dict with keys ['pos', 'vel']" in message
    assert "missing 'vel'" in message and "unexpected 'speed'" in message


@pytest.mark.parametrize("mistake,call,error", [
    ("reset_raises", "reset()", "ValueError: my reset bug: no level file"),
    ("step_raises", "step()", "RuntimeError: my step bug: bad action table"),
])
def test_an_exception_in_the_env_names_env_and_call_and_keeps_its_message(
        alf_cli, tmp_path, mistake, call, error):
    message = _mistake(alf_cli, tmp_path, mistake)
    assert message.startswith(f"{ENV}: {call} raised "), message
    assert message.endswith(error), message  # the user's own message is the last part


@pytest.mark.parametrize("mistake,what", [("nan_obs", "observation"), ("nan_reward", "reward")])
def test_a_nan_during_the_run_stops_it_naming_env_index_and_step(alf_cli, tmp_path,
                                                                 mistake, what):
    result, root = _train(alf_cli, tmp_path,
                          [f"create_environment.env_kwargs={{'mistake': '{mistake}'}}"])
    message = _one_line(result, 1)
    assert message.startswith(f"{ENV} env 0 (of 2) returned a NaN {what} at its step 3"), message
    assert "create_environment.check_values=False" in message
    assert (root / "config.gin").is_file()  # the run had started
    assert not os.listdir(root / "train") if (root / "train").exists() else True


def test_values_check_off_lets_the_nan_through(alf_cli, tmp_path):
    """``check_values=False`` turns the per-step check off (the finite guard of the
    training step is what stops the run then, or nothing does)."""
    result, root = _train(alf_cli, tmp_path, ["create_environment.env_kwargs={'mistake': 'nan_reward'}",
                                              "create_environment.check_values=False"])
    assert (root / "config.gin").is_file(), result.stderr  # the binding is known; the run ran
    assert "returned a NaN reward" not in result.stderr


def test_a_correct_env_trains(alf_cli, tmp_path):
    result, root = _train(alf_cli, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (root / "config.gin").is_file()


def test_check_env_off_skips_the_start_check(alf_cli, tmp_path):
    """``create_environment.check_env=False``: the start-up check is skipped, so the env's
    own exception comes from the run (still one line naming the env and the call)."""
    result, root = _train(alf_cli, tmp_path, ["create_environment.env_kwargs={'mistake': 'reset_raises'}",
                                              "create_environment.check_env=False"])
    assert result.returncode != 0
    assert (root / "config.gin").is_file(), result.stderr  # it failed in the run, not before
    assert "my reset bug" in result.stderr


@pytest.mark.parametrize("env,mistake,call,error", [
    ("OnbBad-v0", "ctor_raises", "gym.make()",
     "FileNotFoundError: my env: config file 'arena.yaml' not found"),
    ("OnbNoObsSpace-v0", "", "gym.make()", "(set self.observation_space to a gymnasium."
     "spaces.Space in __init__) AttributeError: The environment must specify an observation "
     "space."),
])
def test_an_env_that_cannot_be_made_is_one_line_naming_it(alf_cli, tmp_path, env, mistake,
                                                          call, error):
    """The constructor raising (a missing file) or gymnasium refusing the env (no
    observation_space) gave a 40-line traceback through gin and gymnasium, exit 1."""
    message = _mistake(alf_cli, tmp_path, mistake, env=env)
    assert message.startswith(f"Environment '{env}': {call} raised {error}"), message


def test_an_unknown_env_kwarg_still_names_the_kwarg(alf_cli, tmp_path):
    """A TypeError for an env_kwargs key names the key and env_kwargs."""
    result, root = _train(alf_cli, tmp_path, ["create_environment.env_kwargs={'mistak': 'x'}"])
    message = _one_line(result, 2)
    assert message.startswith(f"{ENV}: gym.make() raised (fix create_environment.env_kwargs"), \
        message
    assert "unexpected keyword argument 'mistak'" in message, message
    assert not root.exists()


@pytest.mark.parametrize("backend", ["auto", "async"])
def test_a_step_that_raises_during_the_run_is_one_line_naming_env_index_and_step(
        alf_cli, tmp_path, backend):
    """step() raising at the env's 25th step (over episodes), after the start-up check
    passed, gave a 40-line traceback through gymnasium's vector env (exit 1); with
    ``backend='async'`` gymnasium also logged each worker's traceback (71 lines)."""
    result, root = _train(alf_cli, tmp_path, [
        "create_environment.env_kwargs={'mistake': 'step_raises_late'}",
        f"create_environment.backend='{backend}'",
        "TrainerConfig.num_iterations=4"])
    message = _one_line(result, 1)
    # both envs raise at their 25th step; the async backend's workers report together and
    # gymnasium raises the last one's
    first = (0, 1) if backend == "async" else (0,)
    assert any(message.startswith(f"{ENV} env {i} (of 2): step() at its step 25 raised ")
               for i in first), message
    assert message.endswith("RuntimeError: my step bug: bad action table"), message
    assert (root / "config.gin").is_file()  # the run had started


APPO_CONF = CONF.replace("include 'ppo_cart_pole.gin'", "include 'appo_cart_pole.gin'")


def test_a_nan_in_an_async_env_worker_stops_the_run_naming_the_env(alf_cli, tmp_path):
    """An env worker (``TrainerConfig.async_unroll``) whose env returned a NaN was
    restarted with fresh envs up to 5 times (each restart met the same NaN, or the run
    ended with exit 0) instead of stopping the run with the check's one line."""
    (tmp_path / "onb_env.py").write_text(ONB_ENV)
    conf = alf_cli.write_gin(tmp_path, APPO_CONF + "TrainerConfig.num_iterations = 6\n"
                             "create_environment.env_kwargs = {'mistake': 'nan_obs'}\n",
                             "onb.gin")
    root = tmp_path / "run"
    result = alf_cli.run("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path,
                         timeout=240)
    message = _one_line(result, 1)
    assert message.startswith(f"{ENV} env 0 (of 1) returned a NaN observation at its step 3"), \
        message
    assert "restart" not in result.stderr, result.stderr


def test_an_action_space_alf_cannot_act_in_names_the_env(alf_cli, tmp_path):
    """A Text action space was one line, but without the env's id (which env of a config
    with several, e.g. an evaluation env, was it?)."""
    message = _mistake(alf_cli, tmp_path, "", env="OnbText-v0")
    assert message.startswith("Environment 'OnbText-v0': action_space: Unsupported action "
                              "space Text("), message
    assert "alf handles Discrete, Box, MultiDiscrete, MultiBinary" in message, message


def test_a_reset_without_seed_says_the_signature(alf_cli, tmp_path):
    """The old gym ``reset(self)``: "unexpected keyword argument 'seed'" said what, not
    the fix (gymnasium's signature)."""
    message = _mistake(alf_cli, tmp_path, "", env="OnbNoSeed-v0")
    assert message.startswith("Environment 'OnbNoSeed-v0': reset() raised (gymnasium's "
                              "reset takes seed and options: def reset(self, *, seed=None, "
                              "options=None), then super().reset(seed=seed)) TypeError: "), message
    assert message.endswith("unexpected keyword argument 'seed'"), message


def test_an_env_needing_a_missing_package_says_so(alf_cli, tmp_path):
    """gymnasium's DependencyNotInstalled from the constructor keeps the message the
    backends give it (the start-up check builds the env first)."""
    message = _mistake(alf_cli, tmp_path, "needs_dependency")
    assert message == (f"{ENV} needs an optional dependency: pybullet is not installed, run "
                       "`pip install pybullet`"), message
