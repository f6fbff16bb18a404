"""Shared fixtures: tiny gin configs and running the real commands in a subprocess.

Subprocesses run with ``cwd`` set to a temporary directory (so bare example
names must resolve from ``alf/examples``) and with the repository on
``PYTHONPATH`` (the package need not be pip-installed).
"""
import os
import subprocess
import sys
import textwrap
from typing import Dict, List, Optional, Sequence

import gin
import pytest

from fork_client import ForkServer, needs_fresh_interpreter

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Settings shared by the tiny configs: 2 envs, one 8-wide layer, no eval, fast logs.
_TINY_COMMON = """
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 0
TrainerConfig.unroll_length = 8
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.progress_interval_seconds = 0.0
"""

# Tiny PPO (off-policy whole-buffer path): 2 envs x 8 steps.
TINY_PPO = """
include 'ppo_cart_pole.gin'
""" + _TINY_COMMON + """
TrainerConfig.num_iterations = 4
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
"""

# Tiny SAC on Pendulum with its replay buffer saved: 2 envs x 150 steps into a 64-step
# ring (wrapped), 20-step episodes, few gradient updates (dataset export tests).
TINY_SAC = """
include 'sac_pendulum.gin'
create_environment.num_parallel_environments = 2
create_environment.max_episode_steps = 20
ActorDistributionNetwork.fc_layer_params = (8,)
CriticNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 300
TrainerConfig.initial_collect_steps = 260
TrainerConfig.num_threads = 1
TrainerConfig.mini_batch_size = 16
TrainerConfig.replay_buffer_length = 64
TrainerConfig.save_replay_buffer = True
TrainerConfig.summary_interval = 1000
TrainerConfig.checkpoint_interval = 1000
"""

# Tiny A2C (on-policy path).
TINY_A2C = """
include 'ac_cart_pole.gin'
""" + _TINY_COMMON + """
TrainerConfig.num_iterations = 6
"""


def write_gin(directory, text: str, name: str = "tiny.gin") -> str:
    """Write gin ``text`` (dedented) to ``directory/name``; returns the path."""
    path = os.path.join(str(directory), name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text).lstrip())
    return path


def cli_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Environment for a command subprocess: the repo importable, 1 thread each."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONWARNINGS", None)
    if extra:
        env.update(extra)
    return env


def command(module: str, args: Sequence[str]) -> List[str]:
    return [sys.executable, "-m", module, *[str(a) for a in args]]


# run_cli's commands are forks of one process that imported alf (tests/fork_server.py:
# ~2.5 s of CPU less per command); ALF_TESTS_FORK=0 runs each in a fresh interpreter
FORK = os.environ.get("ALF_TESTS_FORK", "1") != "0"
_fork_server: Optional[ForkServer] = None


def _server() -> ForkServer:
    global _fork_server
    if _fork_server is None:
        _fork_server = ForkServer(cli_env())
    return _fork_server


def pytest_sessionfinish(session, exitstatus):
    if _fork_server is not None:
        _fork_server.close()


def run_cli(module: str, args: Sequence[str], cwd, timeout: float = 120,
            env: Optional[Dict[str, str]] = None,
            fresh: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` in ``cwd``; returns the completed process (text).

    It runs as a fork of a process that imported alf already, exactly as ``python -m``
    would run it (tests/fork_server.py), unless ``fresh`` (a test about the interpreter
    itself), ``ALF_TESTS_FORK=0``, or ``env`` changes a variable that native libraries read
    when they load (OMP_NUM_THREADS, ...): then a fresh interpreter runs it."""
    full_env = cli_env(env)
    argv = command(module, args)
    if FORK and not fresh:
        server = _server()
        if server.usable and not needs_fresh_interpreter(full_env, server.env):
            status, out, err, timed_out = server.run_split(module, [str(a) for a in args],
                                                           str(cwd), full_env, timeout)
            if timed_out:
                raise subprocess.TimeoutExpired(argv, timeout, out, err)
            return subprocess.CompletedProcess(argv, status, out, err)
    return subprocess.run(argv, cwd=str(cwd), env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def start_cli(module: str, args: Sequence[str], cwd, **kwargs) -> subprocess.Popen:
    """Start ``python -m module args`` without waiting (stdout/stderr piped, text)."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(command(module, args), cwd=str(cwd), env=cli_env(), text=True,
                            **kwargs)


def train_run(root_dir, conf_text: str = TINY_PPO, params: Sequence[str] = ()) -> str:
    """Train a run into ``root_dir`` in this process (gin cleared before and after) and
    return ``root_dir``: for a module fixture whose tests are about what reads a run
    directory (play, export, a resume's checks), not about how ``alf.bin.train`` trains
    (tested where that is the subject). ~0.5 s against ~4 s of CPU for a training
    subprocess (interpreter, torch, torch._dynamo). The gin file goes next to ``root_dir``
    (as in ``build_trainer``)."""
    os.makedirs(os.path.dirname(str(root_dir)), exist_ok=True)
    gin.clear_config()
    try:
        build_trainer(root_dir, conf_text, params).run()
    finally:
        gin.clear_config()
    return str(root_dir)


class Cli:
    """What the ``alf_cli`` fixture returns: the helpers above in one object."""
    TINY_PPO = TINY_PPO
    TINY_SAC = TINY_SAC
    TINY_A2C = TINY_A2C
    REPO_ROOT = REPO_ROOT
    write_gin = staticmethod(write_gin)
    train_in_process = staticmethod(train_run)
    run = staticmethod(run_cli)
    start = staticmethod(start_cli)
    env = staticmethod(cli_env)
    command = staticmethod(command)


@pytest.fixture(scope="session")
def alf_cli() -> Cli:
    """Helpers to write tiny gin files and run ``python -m alf.bin.*`` in a subprocess."""
    return Cli()


@pytest.fixture(autouse=True)
def _no_gin_bindings_leak_out():
    """Clear gin after every test: a test (or a module fixture) that parses a config and
    leaves its bindings would change what a later test on the same xdist worker builds
    (a leaked ``NormalProjectionNetwork.scale_distribution = True`` once made an unrelated
    network test fail only in CI's test order)."""
    yield
    gin.clear_config()


@pytest.fixture
def clean_gin():
    """Clear gin bindings before and after a test that parses configs in-process."""
    gin.clear_config()
    yield
    gin.clear_config()


def build_trainer(root_dir, conf_text: str = TINY_PPO, params: Sequence[str] = (),
                  quiet: bool = True):
    """Parse ``conf_text`` (+ ``params`` overrides) and build an in-process Trainer.

    The gin file is written next to ``root_dir`` (as ``<root_dir>.gin``), so
    ``root_dir`` itself is untouched until ``run()``.
    """
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    root_dir = str(root_dir)
    conf = write_gin(os.path.dirname(root_dir), conf_text, os.path.basename(root_dir) + ".gin")
    alf_config.parse_config(conf_file=conf, conf_params=list(params))
    return Trainer(TrainerConfig(), root_dir, config_text=alf_config.config_text(), quiet=quiet)


@pytest.fixture
def make_trainer(clean_gin):
    """``make_trainer(root_dir, conf_text=TINY_PPO, params=())`` -> an in-process Trainer."""
    return build_trainer
