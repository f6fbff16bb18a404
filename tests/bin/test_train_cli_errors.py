"""``python -m alf.bin.train`` on bad input: exit status 2, one short message, nothing written.

All cases start together (one module-scoped fixture) so the interpreter start-ups
overlap; each test then checks its own case. More message cases, checked in-process,
are in test_config_messages.py.
"""
import os
import subprocess

import pytest

TYPO_GIN = """\
# a comment, so the typo is on line 3
include 'ppo_cart_pole.gin'
PPOAlgorithm.gama = 0.9
"""
UNKNOWN_GIN = """\
include 'ppo_cart_pole.gin'
PPOAlgorith.gamma = 0.9
"""

# name -> (gin files to write into the cwd, command-line arguments)
CASES = {
    "param_typo": ({"typo.gin": TYPO_GIN}, ["--conf", "typo.gin"]),
    "unknown_configurable": ({"unknown.gin": UNKNOWN_GIN}, ["--conf", "unknown.gin"]),
    "conf_param_typo": ({}, ["--conf", "ppo_cart_pole.gin",
                             "--conf_param", "TrainerConfig.num_iteratons=3"]),
    "missing_conf": ({}, ["--conf", "ppo_cart_polee.gin"]),
    "unknown_env": ({}, ["--conf", "ppo_cart_pole.gin",
                         "--conf_param", "create_environment.env_name='CartPol-v1'"]),
    "bad_value": ({}, ["--conf", "ppo_cart_pole.gin",
                       "--conf_param", "TrainerConfig.unroll_length=-1"]),
    "policy_workers_sync": ({}, ["--conf", "ppo_cart_pole.gin",  # a sync experiment
                                 "--conf_param", "TrainerConfig.num_policy_workers=1"]),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory, alf_cli):
    """name -> (returncode, stderr, stdout, cwd, root_dir) for every case in CASES."""
    procs = {}
    for name, (files, args) in CASES.items():
        cwd = tmp_path_factory.mktemp(name)
        for fname, text in files.items():
            (cwd / fname).write_text(text)
        root = cwd / "runs" / "x"
        procs[name] = (alf_cli.start("alf.bin.train", args + ["--root_dir", "runs/x"], cwd),
                       cwd, root)
    out = {}
    for name, (p, cwd, root) in procs.items():
        try:
            stdout, stderr = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        out[name] = (p.returncode, stderr, stdout, cwd, root)
    return out


def _check_usage_error(results, name, max_lines=3):
    rc, stderr, stdout, cwd, root = results[name]
    assert rc == 2, f"exit {rc}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert 1 <= len(lines) <= max_lines, stderr
    assert lines[0].startswith("alf.bin.train: error:"), stderr
    assert not os.path.exists(root), "root_dir must not be created on a config error"
    assert not os.path.exists(os.path.join(cwd, "runs"))
    return stderr


def test_param_typo_names_file_line_and_param(results):
    msg = _check_usage_error(results, "param_typo", max_lines=1)
    assert "typo.gin, line 3" in msg
    assert "'gama'" in msg and "PPOAlgorithm" in msg
    assert "Did you mean: gamma" in msg
    assert "resource_reader" not in msg and "Path not found" not in msg  # gin's include noise


def test_unknown_configurable(results):
    msg = _check_usage_error(results, "unknown_configurable", max_lines=1)
    assert "unknown.gin, line 2" in msg and "'PPOAlgorith'" in msg
    assert "Did you mean: PPOAlgorithm" in msg


def test_conf_param_typo(results):
    msg = _check_usage_error(results, "conf_param_typo", max_lines=1)
    assert "--conf_param 'TrainerConfig.num_iteratons=3'" in msg
    assert "'num_iteratons'" in msg and "Did you mean: num_iterations" in msg


def test_missing_conf_lists_examples(results):
    msg = _check_usage_error(results, "missing_conf", max_lines=1)
    assert "'ppo_cart_polee.gin' not found" in msg
    assert "Did you mean: ppo_cart_pole.gin" in msg
    for example in ("ac_cart_pole.gin", "ppo_cart_pole.gin"):
        assert example in msg


def test_unknown_env_id(results):
    msg = _check_usage_error(results, "unknown_env", max_lines=1)
    assert "'CartPol-v1'" in msg and "Did you mean: CartPole-v1" in msg
    assert "In call to configurable" not in msg  # gin's appended context is dropped


def test_bad_value(results):
    msg = _check_usage_error(results, "bad_value", max_lines=1)
    assert "TrainerConfig.unroll_length must be > 0, got -1" in msg
    assert "(set in --conf_param 'TrainerConfig.unroll_length=-1')" in msg



def test_policy_workers_on_a_sync_run_are_refused(results):
    """Issue 29 item 5: num_policy_workers=1 with async_unroll=False used to train
    silently without any policy worker."""
    msg = _check_usage_error(results, "policy_workers_sync", max_lines=1)
    assert "TrainerConfig.num_policy_workers=1 needs async_unroll=True" in msg
    assert "set TrainerConfig.async_unroll=True, or TrainerConfig.num_policy_workers=None" in msg
    assert "(set in --conf_param 'TrainerConfig.num_policy_workers=1')" in msg
