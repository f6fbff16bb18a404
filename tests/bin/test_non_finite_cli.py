"""Training that goes non-finite stops in one line; non-finite checkpoints are never written
and never loaded; config values that must be finite are checked before anything is written.

Reported (issue 39, item 1): ``ppo_cart_pole.gin`` with ``lr/LinearSchedule.start=1e30``
exited 0 with NaN weights, its NaN checkpoints rotating the good ones out, and ``play`` and
a resume loaded them without a word; ``sac_pendulum.gin`` with ``alf.optimizers.Adam.lr=1e30``
was a 72-line torch traceback ("normal expects all elements of std >= 0.0");
``Agent.reward_weights=[1.0, 1e999]`` was accepted (exit 0, 14 NaN tensors).
"""
import math
import os

import pytest
import torch

GOOD = ["TrainerConfig.checkpoint_interval=1", "TrainerConfig.num_checkpoints=2",
        "TrainerConfig.num_iterations=3"]
CKPTS = ["ckpt-0000000002.pt", "ckpt-0000000003.pt"]

TINY_SAC = """
include 'sac_pendulum.gin'
create_environment.num_parallel_environments = 2
create_environment.max_episode_steps = 20
ActorDistributionNetwork.fc_layer_params = (8,)
CriticNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 80
TrainerConfig.initial_collect_steps = 40
TrainerConfig.num_threads = 1
TrainerConfig.mini_batch_size = 16
TrainerConfig.checkpoint_interval = 10
TrainerConfig.progress_interval_seconds = 0.0
"""

TINY_PPO_RND = """
include 'ppo_rnd_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
RNDRewardModule.fc_layer_params = (8,)
RNDRewardModule.feature_size = 8
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 2
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.evaluate = False
"""


def _args(root, conf, params=()):
    args = ["--conf", conf, "--root_dir", str(root)]
    for p in params:
        args += ["--conf_param", p]
    return args


def _error_lines(stderr):
    assert "Traceback" not in stderr, stderr
    return [l for l in stderr.splitlines() if ": error: " in l]


def _all_finite(path):
    state = torch.load(path, map_location="cpu", weights_only=True)["algorithm"]
    return all(bool(torch.isfinite(t).all()) for t in _tensors(state) if t.is_floating_point())


def _tensors(nest):
    if isinstance(nest, torch.Tensor):
        yield nest
    elif isinstance(nest, dict):
        for v in nest.values():
            yield from _tensors(v)
    elif isinstance(nest, (list, tuple)):
        for v in nest:
            yield from _tensors(v)


@pytest.fixture
def good_run(alf_cli, tmp_path):
    """3 healthy PPO iterations, checkpoints 2 and 3 kept."""
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO, "tiny.gin")
    root = tmp_path / "run"
    alf_cli.train_in_process(root, alf_cli.TINY_PPO, GOOD)
    assert sorted(os.listdir(root / "train")) == CKPTS
    return root


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("thread", [False, True])
def test_ppo_huge_lr_stops_in_one_line_and_keeps_the_finite_checkpoints(
        alf_cli, tmp_path, good_run, precision, thread):
    params = ["lr/LinearSchedule.start=1e30", "TrainerConfig.num_iterations=8",
              f"TrainerConfig.train_precision='{precision}'",
              f"TrainerConfig.learner_thread={thread}"]
    r = alf_cli.run("alf.bin.train", _args(good_run, "tiny.gin", params), tmp_path)
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r.stderr)
    assert line.startswith("alf.bin.train: error: training went non-finite at iteration 4 "
                           "(update "), line
    assert "the parameter _actor_network._encoder._fc_layers.0.weight (|x| up to" in line, line
    assert "lr/LinearSchedule.start = 1e+30 at --conf_param 'lr/LinearSchedule.start=1e30'" \
        in line, line
    assert ("bf16 training (TrainerConfig.train_precision" if precision == "bf16"
            else "the precision (fp32 here)") in line, line
    assert "The newest checkpoint, train/ckpt-0000000003.pt (iteration 3), is from before " \
           "it and finite" in line, line
    assert sorted(os.listdir(good_run / "train")) == CKPTS
    assert all(_all_finite(good_run / "train" / c) for c in CKPTS)


def test_turned_off_training_goes_on_but_no_non_finite_checkpoint_is_written(
        alf_cli, tmp_path, good_run):
    params = ["lr/LinearSchedule.start=1e30", "TrainerConfig.num_iterations=6",
              "TrainerConfig.check_finite=False"]
    r = alf_cli.run("alf.bin.train", _args(good_run, "tiny.gin", params), tmp_path)
    assert r.returncode == 0, r.stderr
    skipped = [l for l in r.stderr.splitlines() if "Not saving the checkpoint" in l]
    assert skipped and "ckpt-0000000003.pt stays the newest" in skipped[0], r.stderr
    assert sorted(os.listdir(good_run / "train")) == CKPTS  # none rotated out
    assert all(_all_finite(good_run / "train" / c) for c in CKPTS)


def test_sac_huge_lr_is_one_line_naming_the_parameter_not_a_torch_traceback(alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, TINY_SAC, "sac.gin")
    root = tmp_path / "sac"
    r = alf_cli.run("alf.bin.train", _args(root, "sac.gin", ["alf.optimizers.Adam.lr=1e30"]),
                    tmp_path)
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r.stderr)
    assert "normal expects" not in r.stderr
    assert line.startswith("alf.bin.train: error: training went non-finite at iteration "), line
    assert "(|x| up to 1e+30)" in line and "the learning rate (1e+30 now; " \
        "alf.optimizers.Adam.lr = 1e+30 at --conf_param 'alf.optimizers.Adam.lr=1e30')" in line
    assert "The newest checkpoint, train/ckpt-0000000010.pt (iteration 10)" in line, line
    assert os.listdir(root / "train") == ["ckpt-0000000010.pt"]


@pytest.mark.parametrize("binding, named", [
    ("Agent.reward_weights=[1.0, 1e999]", "Agent.reward_weights = [1.0, inf] is out of range: "
                                          "item 2 must be a finite number"),
    ("lr/LinearSchedule.start=1e999", "lr/LinearSchedule.start = inf is out of range: it "
                                      "must be a finite number"),
    ("rnd/alf.optimizers.Adam.lr=1e999", "rnd/Adam.lr = inf is out of range: it must be a "
                                         "finite number"),
    ("alf.optimizers.Adam.gradient_clipping=1e999", "Adam.gradient_clipping = inf is out "
                                                     "of range: it must be a finite number"),
])
def test_values_that_must_be_finite_are_refused_before_anything_is_written(
        alf_cli, tmp_path, binding, named):
    alf_cli.write_gin(tmp_path, TINY_PPO_RND, "rnd.gin")
    root = tmp_path / "rnd"
    r = alf_cli.run("alf.bin.train", _args(root, "rnd.gin", [binding]), tmp_path)
    assert r.returncode == 2, r.stderr
    [line] = _error_lines(r.stderr)
    assert line == f"alf.bin.train: error: Config error (--conf_param '{binding}'): {named}"
    assert not root.exists()


def test_a_composed_agent_names_the_part_by_its_key_and_shows_the_reward_weights(
        alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, TINY_PPO_RND, "rnd.gin")
    root = tmp_path / "rnd"
    r = alf_cli.run("alf.bin.train", _args(root, "rnd.gin", ["rnd/alf.optimizers.Adam.lr=1e30"]),
                    tmp_path)
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r.stderr)
    assert "the parameter _reward_modules.0._predictor._fc_layers.0.weight (|x| up to 1e+30)" \
        in line, line
    assert "rnd/alf.optimizers.Adam.lr = 1e+30 at --conf_param " \
           "'rnd/alf.optimizers.Adam.lr=1e30'" in line, line
    assert "the reward scale (Agent.reward_weights = [1.0, 0.1]; " in line, line


def _poison_newest(root):
    """A checkpoint as a diverged run wrote them before the guard: NaN weights."""
    path = root / "train" / CKPTS[-1]
    state = torch.load(path, map_location="cpu", weights_only=True)
    key = "_value_network._encoder._fc_layers.0.bias"
    state["algorithm"][key] = torch.full_like(state["algorithm"][key], math.nan)
    torch.save(state, path)
    return path, key


@pytest.mark.parametrize("command, flags", [
    ("alf.bin.play", ["--num_episodes", "1"]),
    ("alf.bin.play", ["--num_episodes", "1", "--checkpoint", "3"]),
    ("alf.bin.train", ["--conf_param", "TrainerConfig.num_iterations=5"])])
def test_play_and_resume_refuse_a_non_finite_checkpoint(alf_cli, tmp_path, good_run, command,
                                                        flags):
    path, key = _poison_newest(good_run)
    before = {n: os.path.getmtime(good_run / "train" / n) for n in CKPTS}
    args = ["--root_dir", str(good_run)] + flags
    r = alf_cli.run(command, args, tmp_path)
    assert r.returncode == 2, r.stderr
    [line] = _error_lines(r.stderr)
    assert line == (f"{command}: error: checkpoint {path} holds non-finite values ({key} is "
                    "nan): the run diverged before it was saved; move it (and any newer one) "
                    f"aside to use {CKPTS[0]}, the newest finite one")
    after = {n: os.path.getmtime(good_run / "train" / n) for n in os.listdir(good_run / "train")}
    assert after == before  # nothing written, nothing rotated


TINY_APPO = """
include 'appo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.progress_interval_seconds = 0.0
"""


@pytest.mark.parametrize("thread", [False, True])
def test_async_appo_huge_lr_stops_before_the_env_workers_get_the_weights(alf_cli, tmp_path,
                                                                         thread):
    """The learner stops before publishing the diverged weights: no env worker acts on
    them (which would crash the workers, not name the cause). With a learner thread the
    main thread publishes; it never publishes a step the guard found diverged
    (tests/trainers/test_finite_guard_training.py checks the published weights)."""
    alf_cli.write_gin(tmp_path, TINY_APPO, "appo.gin")
    root = tmp_path / "appo"
    r = alf_cli.run("alf.bin.train", _args(root, "appo.gin", [
        "lr/LinearSchedule.start=1e30", f"TrainerConfig.learner_thread={thread}"]), tmp_path)
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r.stderr)
    assert line.startswith("alf.bin.train: error: training went non-finite at iteration 1 "
                           "(update 1): the parameter _actor_network."), line
    assert "crashed" not in r.stderr and "restart" not in r.stderr
    assert not (root / "train").exists()


POISON = '''
"""A callback that sets one buffer of the algorithm to inf at one iteration: statistics
that overflowed (a normaliser's variance), which no loss, gradient or parameter shows."""
import math

import alf
from alf.trainers.callbacks import TrainerCallback


@alf.configurable
class PoisonBuffer(TrainerCallback):
    def __init__(self, name: str = "", at_iteration: int = 3):
        self.name, self.at_iteration = name, at_iteration

    def on_iteration_end(self, algorithm, context, metrics):
        if context.iteration == self.at_iteration:
            dict(algorithm.named_buffers())[self.name].fill_(math.inf)
'''

BUFFER = "_data_transformer.members.1.return_stats.var"
POISONED_PPO = """
import poison
""" + """
TrainerConfig.data_transformer_ctor = [@ObservationNormalizer, @RewardNormalizer]
TrainerConfig.callbacks = [@PoisonBuffer()]
PoisonBuffer.name = '{buffer}'
PoisonBuffer.at_iteration = 3
TrainerConfig.num_iterations = 5
TrainerConfig.checkpoint_interval = 1
TrainerConfig.num_checkpoints = 3
""".format(buffer=BUFFER)


@pytest.fixture
def poisoned_conf(alf_cli, tmp_path):
    (tmp_path / "poison.py").write_text(POISON)
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + POISONED_PPO, "poisoned.gin")
    return "poisoned.gin"


def test_a_non_finite_buffer_stops_the_run_at_the_save_and_keeps_the_last_checkpoint(
        alf_cli, tmp_path, poisoned_conf):
    """A buffer is none of the loss, gradients and parameters the update checks: with
    the guard on, the checkpoint save that finds it stops the run (it used to skip
    every later checkpoint with a warning and exit 0)."""
    root = tmp_path / "run"
    r = alf_cli.run("alf.bin.train", _args(root, poisoned_conf), tmp_path)
    assert r.returncode == 1, r.stderr
    [line] = _error_lines(r.stderr)
    assert line.startswith(
        f"alf.bin.train: error: training went non-finite by iteration 3: the buffer {BUFFER} "
        "(inf), found in the checkpoint of iteration 3, which was not written. Likely "
        "causes: the learning rate ("), line
    assert line.endswith("The newest checkpoint, train/ckpt-0000000002.pt (iteration 2), is "
                         "from before it and finite; set TrainerConfig.check_finite=False to "
                         "train on regardless"), line
    assert "Not saving" not in r.stderr
    assert sorted(os.listdir(root / "train")) == ["ckpt-0000000001.pt", "ckpt-0000000002.pt"]
    assert all(_all_finite(root / "train" / c) for c in os.listdir(root / "train"))


def test_a_non_finite_buffer_with_the_guard_off_trains_on_and_says_so_truly(
        alf_cli, tmp_path, poisoned_conf):
    root = tmp_path / "run"
    r = alf_cli.run("alf.bin.train", _args(root, poisoned_conf,
                                           ["TrainerConfig.check_finite=False"]), tmp_path)
    assert r.returncode == 0, r.stderr
    skipped = [l for l in r.stderr.splitlines() if "Not saving the checkpoint" in l]
    assert [l.split("Not saving", 1)[1] for l in skipped] == [
        f" the checkpoint of iteration {i}: the algorithm's {BUFFER} is inf; "
        "ckpt-0000000002.pt stays the newest. With TrainerConfig.check_finite=False training "
        "goes on, and no checkpoint is written while a tensor is non-finite" for i in (3, 4, 5)]
    assert sorted(os.listdir(root / "train")) == ["ckpt-0000000001.pt", "ckpt-0000000002.pt"]
