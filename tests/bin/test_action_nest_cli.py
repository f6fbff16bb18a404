"""``python -m alf.bin.train`` on MultiDiscrete and Dict action spaces (issue 41, item 1).

Before action nests were supported, PPO on a ``MultiDiscrete([3, 3])`` env exited 2 with
"CategoricalProjectionNetwork needs a scalar discrete BoundedTensorSpec ... wrap the env
to a single Discrete action". Now PPO and APPO (async, with env and policy workers) train
them, SAC trains a Dict of Box actions (also async with a policy worker; its replay buffer
and checkpoint resume), play runs the trained policies, and the algorithms that need one
action tensor refuse in one line naming the space, before anything is written. All cases
start together (one module fixture) so the interpreter start-ups overlap.
"""
import os
import subprocess

import pytest

GRID = "alf.examples.action_nest_envs:GridMove-v0"
HYBRID = "alf.examples.action_nest_envs:HybridTarget-v0"
TINY = ["--conf_param", "TrainerConfig.num_env_steps=0",
        "--conf_param", "TrainerConfig.num_iterations=2",
        "--conf_param", "TrainerConfig.unroll_length=8",
        "--conf_param", "TrainerConfig.mini_batch_size=8",
        "--conf_param", "TrainerConfig.evaluate=False",
        "--conf_param", "create_environment.num_parallel_environments=2"]


def _env(name):
    return ["--conf_param", f"create_environment.env_name='{name}'"]


CASES = {
    "ppo_multidiscrete": ["--conf", "ppo_grid_multidiscrete.gin"] + TINY,
    "ppo_hybrid": ["--conf", "ppo_hybrid_action.gin"] + TINY,
    "appo_async_workers": ["--conf", "appo_cart_pole.gin"] + _env(GRID) + TINY + [
        "--conf_param", "TrainerConfig.num_env_workers=2",
        "--conf_param", "TrainerConfig.num_policy_workers=1"],
    "dqn_multidiscrete": ["--conf", "dqn_cart_pole.gin"] + _env(GRID),
    "sac_hybrid": ["--conf", "sac_pendulum.gin"] + _env(HYBRID),
    "sac_nested_box": ["--conf", "sac_nested_box.gin"] + TINY + [
        "--conf_param", "TrainerConfig.initial_collect_steps=8",
        "--conf_param", "TrainerConfig.save_replay_buffer=True"],
    "sac_nested_box_async_workers": ["--conf", "sac_nested_box.gin"] + TINY + [
        "--conf_param", "TrainerConfig.initial_collect_steps=8",
        "--conf_param", "TrainerConfig.async_unroll=True",
        "--conf_param", "TrainerConfig.num_env_workers=1",
        "--conf_param", "TrainerConfig.env_groups_per_worker=2",
        "--conf_param", "TrainerConfig.num_policy_workers=1"],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory, alf_cli):
    """name -> (returncode, stderr, root_dir) for every case in CASES."""
    procs = {}
    for name, args in CASES.items():
        cwd = tmp_path_factory.mktemp(name)
        procs[name] = (alf_cli.start("alf.bin.train", args + ["--root_dir", "runs/x"], cwd),
                       cwd / "runs" / "x")
    out = {}
    for name, (p, root) in procs.items():
        try:
            _, stderr = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            _, stderr = p.communicate()
        out[name] = (p.returncode, stderr, root)
    return out


def _trained(results, name):
    rc, stderr, root = results[name]
    assert rc == 0, stderr
    assert "Traceback" not in stderr and "error" not in stderr, stderr
    assert os.path.exists(root / "train" / "ckpt-0000000002.pt")
    with open(root / "progress.csv") as f:
        assert len(f.read().splitlines()) == 3  # header + 2 iterations
    return root


@pytest.mark.parametrize("name", ["ppo_multidiscrete", "ppo_hybrid", "appo_async_workers",
                                  "sac_nested_box", "sac_nested_box_async_workers"])
def test_action_nests_train(results, name):
    _trained(results, name)


def test_play_runs_a_hybrid_action_policy(results, alf_cli):
    root = _trained(results, "ppo_hybrid")
    p = alf_cli.run("alf.bin.play", ["--root_dir", str(root), "--num_episodes", "2"],
                    cwd=root.parent)
    assert p.returncode == 0, p.stderr
    assert "episode 2: return" in p.stdout and "length 10" in p.stdout


def test_play_runs_a_sac_policy_on_a_box_nest(results, alf_cli):
    root = _trained(results, "sac_nested_box")
    p = alf_cli.run("alf.bin.play", ["--root_dir", str(root), "--num_episodes", "2"],
                    cwd=root.parent)
    assert p.returncode == 0, p.stderr
    assert "episode 2: return -" in p.stdout and "length 1" in p.stdout


def test_sac_on_a_box_nest_resumes_with_its_replay_buffer(results, alf_cli):
    # checkpoint + replay buffer of a Dict action restored (2 iterations x 2 envs x 8 steps)
    root = _trained(results, "sac_nested_box")
    p = alf_cli.run("alf.bin.train", ["--root_dir", str(root), "--conf_param",
                                      "TrainerConfig.num_iterations=4"], cwd=root.parent)
    assert p.returncode == 0, p.stderr
    assert "[alf] resumed from iteration 2 (32 env steps)" in p.stderr
    assert "[alf] restored the replay buffer: 32 steps" in p.stderr, p.stderr
    assert os.path.exists(root / "train" / "ckpt-0000000004.pt")


@pytest.mark.parametrize("name, algorithm, space", [
    ("dqn_multidiscrete", "DqnAlgorithm takes one Discrete action", "MultiDiscrete([3, 3])"),
    ("sac_hybrid", "SacAlgorithm takes one Box, one Discrete or a Dict/Tuple nest of 1-d "
     "Box actions",
     "Dict(sign=Discrete(2), size=Box(1,))")])
def test_other_algorithms_refuse_in_one_line(results, name, algorithm, space):
    rc, stderr, root = results[name]
    assert rc == 2, stderr
    lines = [l for l in stderr.splitlines() if l.strip() and "random_seed not set" not in l]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("alf.bin.train: error: " + algorithm), stderr
    assert f"not the action space {space};" in lines[0]
    assert "train with PPOAlgorithm, ActorCriticAlgorithm, APPOAlgorithm" in lines[0]
    assert not os.path.exists(root) and not os.path.exists(root.parent)
