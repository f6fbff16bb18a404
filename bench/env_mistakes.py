"""28 mistakes a researcher makes with their own environment, each run as the real command.

    python bench/env_mistakes.py [--only NAME ...] [--keep DIR]

Issue 41 tried alf as a new user would, with their own envs written as gin-imported
modules; 13 of its 28 mistakes gave a traceback, a misleading message or were silently
trained on. This script rebuilds the 28: each case writes a small user env module
(``my_env.py``, or another module the gin file imports) next to a gin file that imports
it, and runs ``python -m alf.bin.train --conf my.gin --root_dir run`` in a fresh
interpreter in a temporary folder. Tiny runs (2 envs, 8-step unrolls, a few iterations).

The 28 (``expect``: ``error`` = one line, exit 2, nothing under --root_dir; ``run`` = one
error line naming the env, exit 1, during the run; ``warn`` = exit 0 with one warning):

Start-up: the env breaks gymnasium's API or its own spaces (the 13 of the issue first)
 1. reset_shape: reset() returns an observation of the wrong shape.
 2. step_shape: step() returns a (2, 2) observation where the space says (4,).
 3. old_step: step() returns the old 4-tuple (obs, reward, done, info).
 4. old_reset: reset() returns only the observation (the old gym API).
 5. dict_keys: a Dict observation whose keys are not the space's ('speed' for 'vel').
 6. reward_array: step() returns a reward array without declaring a reward_space.
 7. reset_raises: the env's own reset() raises (a level file is missing).
 8. step_raises: the env's own step() raises on its first step.
 9. nan_obs: an observation turns NaN at step 3 (run: exit 1 naming env, index, step).
10. nan_reward: a reward turns NaN at step 3 (run: exit 1).
11. forgotten_import: the gin file names the custom id but forgets ``import my_env``.
12. wrapper_returns_none: a gym wrapper function that forgets to return the env.
13. plain_wrapper: a plain (not @alf.configurable) function in gym_wrappers.
Start-up: mistakes that already gave one line before issue 41 (kept from regressing)
14. id_typo: a typo in the custom env id ('MyEnvv-v0').
15. gin_param_typo: a typo in a gin parameter name (create_environment.num_parallel_envs).
16. env_kwargs_unknown: an env_kwargs key the constructor does not take.
17. no_such_module: the "module:Env-v0" form naming a module that does not exist.
18. import_error: the gin file imports a module whose own import fails (missing package).
19. syntax_error: the gin file imports a module with a syntax error.
20. ctor_raises: the env's constructor raises (its config file is missing).
21. no_obs_space: the env never sets observation_space.
22. text_action: a Text action space (no distribution alf can put on it).
23. dqn_on_box: DQN's config on an env with a Box action.
24. sac_on_multidiscrete: SAC's config on an env with a MultiDiscrete([3, 3]) action (SAC
    takes one Box, one Discrete or a nest of Box leaves; PPO, APPO, A2C take the nest).
25. reset_no_seed: reset(self) without the seed=/options= keywords.
During the run, and an image without conv settings
26. image_no_conv: a (32, 32, 3) image observation with an MLP-only config (a one-line
    warning that it is flattened; the run trains, exit 0).
27. step_raises_late: step() raises only at its 25th step, after the start-up check passed
    (exit 1 naming env, index and step, the user's own message last).
28. async_nan_obs: an observation turns NaN mid-run in an async env worker
    (``TrainerConfig.async_unroll``, appo_cart_pole.gin): exit 1 naming the env, not a
    worker crash restarted until its limit.

For each case it records the exit status, the number of stderr lines (for a run-time
error, the lines holding "error", as tests/bin/test_env_checker_cli.py counts them; a log
line ``[alf] ...`` is not a message line before the run), whether "Traceback" appears,
whether anything was written under --root_dir, and the message line. It prints a markdown
table, writes bench/results/env_mistakes.json and exits 0 when every case passes.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Dict, List, NamedTuple, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The user's env module: MyEnv-v0 (Box(4) obs, Discrete(2) action, 10-step episodes),
# taking ``mistake`` in env_kwargs; a few other envs with their own spaces.
MY_ENV = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class MyEnv(gym.Env):
        def __init__(self, mistake="", bad_step=3):
            self.mistake = mistake
            self.bad_step = bad_step
            self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self._t = 0
            self._steps = 0  # over episodes

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self._t = 0
            if self.mistake == "reset_raises":
                raise ValueError("my reset bug: no level file")
            if self.mistake == "reset_shape":
                return np.zeros(3, np.float32), {}
            if self.mistake == "old_reset":
                return np.zeros(4, np.float32)
            return np.zeros(4, np.float32), {}

        def step(self, action):
            self._t += 1
            self._steps += 1
            obs = np.full(4, 0.1 * self._t, np.float32)
            reward = 1.0
            late = self._steps == self.bad_step
            if self.mistake == "step_raises" or (self.mistake == "step_raises_late" and late):
                raise RuntimeError("my step bug: bad action table")
            if self.mistake == "step_shape":
                obs = np.zeros((2, 2), np.float32)
            if self.mistake == "reward_array":
                reward = np.array([1.0, 0.0], np.float32)
            if self.mistake == "nan_obs" and late:
                obs[1] = np.nan
            if self.mistake == "nan_reward" and late:
                reward = float("nan")
            if self.mistake == "old_step":
                return obs, reward, self._t >= 10, {}
            return obs, reward, self._t >= 10, False, {}


    class DictEnv(MyEnv):
        """Its observations have the key 'speed' where the space says 'vel'."""
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Dict({
                "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                "vel": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return {"pos": np.zeros(2, np.float32), "speed": np.zeros(2, np.float32)}, {}

        def step(self, action):
            _, reward, terminated, truncated, info = super().step(action)
            return self.reset()[0], reward, terminated, truncated, info


    class BoxActionEnv(MyEnv):
        def __init__(self):
            super().__init__()
            self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


    class MultiDiscreteEnv(MyEnv):
        def __init__(self):
            super().__init__()
            self.action_space = gym.spaces.MultiDiscrete([3, 3])


    class TextActionEnv(MyEnv):
        def __init__(self):
            super().__init__()
            self.action_space = gym.spaces.Text(5)


    class NoObsSpaceEnv(gym.Env):
        def __init__(self):
            self.action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            return np.zeros(4, np.float32), {}

        def step(self, action):
            return np.zeros(4, np.float32), 0.0, False, False, {}


    class NoSeedEnv(MyEnv):
        def reset(self):
            self._t = 0
            return np.zeros(4, np.float32), {}


    class BrokenCtorEnv(MyEnv):
        def __init__(self):
            raise FileNotFoundError("my_env: config file 'arena.yaml' not found")


    class ImageEnv(MyEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Box(0, 255, (32, 32, 3), np.uint8)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros((32, 32, 3), np.uint8), {}

        def step(self, action):
            _, reward, terminated, truncated, info = super().step(action)
            return np.zeros((32, 32, 3), np.uint8), reward, terminated, truncated, info


    for _name, _cls in [("MyEnv-v0", MyEnv), ("MyDict-v0", DictEnv),
                        ("MyBoxAction-v0", BoxActionEnv), ("MyText-v0", TextActionEnv),
                        ("MyMultiDiscrete-v0", MultiDiscreteEnv),
                        ("MyNoObsSpace-v0", NoObsSpaceEnv), ("MyNoSeed-v0", NoSeedEnv),
                        ("MyBrokenCtor-v0", BrokenCtorEnv), ("MyImage-v0", ImageEnv)]:
        gym.register(_name, entry_point=_cls, max_episode_steps=10)
''')

MY_WRAPPERS = textwrap.dedent('''
    import gymnasium as gym

    import alf


    @alf.configurable
    def clip_reward(env):
        env = gym.wrappers.ClipReward(env, -1.0, 1.0)


    def plain_clip_reward(env):
        return gym.wrappers.ClipReward(env, -1.0, 1.0)
''')

MY_SIM = "import my_simulator_bindings  # a package this machine does not have\n"
MY_TYPO = "import gymnasium as gym\n\ndef make(:\n    pass\n"

_TINY = """
create_environment.num_parallel_environments = 2
TrainerConfig.random_seed = 1
TrainerConfig.num_env_steps = 0
TrainerConfig.unroll_length = 8
TrainerConfig.evaluate = False
TrainerConfig.checkpoint_interval = 1000
"""

PPO = """
include 'ppo_cart_pole.gin'
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_iterations = 4
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 1
""" + _TINY

APPO = """
include 'appo_cart_pole.gin'
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_iterations = 6
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 1
""" + _TINY

DQN = """
include 'dqn_cart_pole.gin'
TrainerConfig.num_iterations = 2
TrainerConfig.initial_collect_steps = 4
TrainerConfig.mini_batch_size = 8
""" + _TINY

SAC = """
include 'sac_pendulum.gin'
ActorDistributionNetwork.fc_layer_params = (8,)
CriticNetwork.fc_layer_params = (8,)
TrainerConfig.num_iterations = 2
TrainerConfig.initial_collect_steps = 4
TrainerConfig.mini_batch_size = 8
""" + _TINY


class Case(NamedTuple):
    name: str
    lines: str  # gin lines (after the base config): env id, kwargs, ...
    says: Sequence[str]  # parts the message must hold
    expect: str = "error"  # error (exit 2) | run (exit 1) | warn (exit 0, one warning)
    base: str = PPO
    imports: str = "import my_env\n"


def _env(env_id: str, mistake: str = "", **kwargs) -> str:
    lines = f"create_environment.env_name = '{env_id}'\n"
    kw = dict(kwargs, mistake=mistake) if mistake else kwargs
    if kw:
        lines += f"create_environment.env_kwargs = {kw!r}\n"
    return lines


MY = "Environment 'MyEnv-v0'"
WRAPPED = "import my_env\nimport my_wrappers\n"
CASES: List[Case] = [
    Case("reset_shape", _env("MyEnv-v0", "reset_shape"), [MY, "reset()", "shape (3,)"]),
    Case("step_shape", _env("MyEnv-v0", "step_shape"), [MY, "step()", "shape (2, 2)"]),
    Case("old_step", _env("MyEnv-v0", "old_step"), [MY, "step() returned 4 values"]),
    Case("old_reset", _env("MyEnv-v0", "old_reset"), [MY, "return obs, {}"]),
    Case("dict_keys", _env("MyDict-v0"), ["'MyDict-v0'", "missing 'vel'", "unexpected 'speed'"]),
    Case("reward_array", _env("MyEnv-v0", "reward_array"), [MY, "reward_space"]),
    Case("reset_raises", _env("MyEnv-v0", "reset_raises"),
         [MY, "reset() raised", "my reset bug: no level file"]),
    Case("step_raises", _env("MyEnv-v0", "step_raises"),
         [MY, "step() raised", "my step bug: bad action table"]),
    Case("nan_obs", _env("MyEnv-v0", "nan_obs"), [MY, "env 0 (of 2)", "NaN observation",
                                                  "step 3"], "run"),
    Case("nan_reward", _env("MyEnv-v0", "nan_reward"), [MY, "NaN reward", "step 3"], "run"),
    Case("forgotten_import", _env("MyDict-v0"), ["'MyDict-v0'", "import my_module"],
         imports=""),
    Case("wrapper_returns_none", _env("MyEnv-v0") + "create_environment.gym_wrappers = "
         "[@clip_reward]\n", ["clip_reward(env) returned None", "return the wrapped env"],
         imports=WRAPPED),
    Case("plain_wrapper", _env("MyEnv-v0") + "create_environment.gym_wrappers = "
         "[@plain_clip_reward]\n", ["plain_clip_reward", "@alf.configurable"],
         imports=WRAPPED),
    Case("id_typo", _env("MyEnvv-v0"), ["'MyEnvv-v0'", "MyEnv-v0"]),
    Case("gin_param_typo", _env("MyEnv-v0") + "create_environment.num_parallel_envs = 4\n",
         ["num_parallel_envs", "num_parallel_environments"]),
    Case("env_kwargs_unknown", _env("MyEnv-v0", mistak="nan_obs"), ["mistak"]),
    Case("no_such_module", _env("no_such_module:MyEnv-v0"), ["no_such_module"]),
    Case("import_error", _env("MyEnv-v0"), ["my_simulator_bindings"],
         imports="import my_env\nimport my_sim\n"),
    Case("syntax_error", _env("MyEnv-v0"), ["my_typo", "line 3"],
         imports="import my_env\nimport my_typo\n"),
    Case("ctor_raises", _env("MyBrokenCtor-v0"), ["'MyBrokenCtor-v0'", "arena.yaml"]),
    Case("no_obs_space", _env("MyNoObsSpace-v0"), ["'MyNoObsSpace-v0'", "observation_space"]),
    Case("text_action", _env("MyText-v0"), ["'MyText-v0'", "Text"]),
    Case("dqn_on_box", _env("MyBoxAction-v0"), ["DqnAlgorithm", "Discrete"], base=DQN),
    Case("sac_on_multidiscrete", _env("MyMultiDiscrete-v0"), ["Sac", "one Box, one Discrete or a Dict/Tuple nest of 1-d Box"],
         base=SAC),
    Case("reset_no_seed", _env("MyNoSeed-v0"), ["'MyNoSeed-v0'", "reset()",
                                               "def reset(self, *, seed=None"]),
    Case("image_no_conv", _env("MyImage-v0"), ["flattened", "[32, 32, 3]", "conv_layer_params"],
         "warn"),
    Case("step_raises_late", _env("MyEnv-v0", "step_raises_late", bad_step=25),
         [MY, "step()", "my step bug: bad action table"], "run"),
    Case("async_nan_obs", _env("MyEnv-v0", "nan_obs", bad_step=20),
         [MY, "NaN observation"], "run", base=APPO),
]

FILES = {"my_env.py": MY_ENV, "my_wrappers.py": MY_WRAPPERS, "my_sim.py": MY_SIM,
         "my_typo.py": MY_TYPO}


def _message_lines(stderr: str, status: int) -> List[str]:
    """The message lines: before the run (exit 2), every stderr line that is not an
    ``[alf]`` log line; during a run (exit 1), the lines that hold "error" (the run's own
    start-up log lines come before it); exit 0, the warning lines."""
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    if status == 1:
        return [l for l in lines if "error" in l.lower()]
    if status == 0:
        return [l for l in lines if "warn" in l.lower() or "Traceback" in l]
    return [l for l in lines if not l.startswith("[alf]") or "error" in l.lower()]


def _written(root: str) -> bool:
    return os.path.exists(root) and bool(os.listdir(root))


def run_case(case: Case, folder: str, timeout: float = 300) -> Dict:
    """Run ``case`` in ``folder``: its result row (see the module docstring)."""
    for name, text in FILES.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    with open(os.path.join(folder, "my.gin"), "w") as f:
        f.write(case.imports + case.base + case.lines)
    root = os.path.join(folder, "run")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "alf.bin.train", "--conf", "my.gin",
                           "--root_dir", root], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=timeout)
    status = proc.returncode
    lines = _message_lines(proc.stderr, status)
    message = lines[0] if lines else ""
    row = {"case": case.name, "expect": case.expect, "exit": status, "lines": len(lines),
           "traceback": "Traceback" in proc.stderr, "written": _written(root),
           "message": message, "seconds": round(time.time() - start, 1)}
    row["pass"] = _passes(case, row, message)
    if not row["pass"]:
        row["stderr_tail"] = proc.stderr[-3000:]
    return row


def _passes(case: Case, row: Dict, message: str) -> bool:
    want = {"error": 2, "run": 1, "warn": 0}[case.expect]
    ok = row["exit"] == want and row["lines"] == 1 and not row["traceback"]
    if case.expect == "error":
        ok = ok and not row["written"] and message.startswith("alf.bin.train: error: ")
    if case.expect == "run":
        ok = ok and message.startswith("alf.bin.train: error: ")
    return ok and all(part in message for part in case.says)


def _abbreviate(message: str, width: int = 110) -> str:
    message = message.replace("alf.bin.train: error: ", "").replace("|", "\\|")
    return message if len(message) <= width else message[:width - 3] + "..."


def table(rows: List[Dict]) -> str:
    out = ["| # | case | exit | lines | traceback | written | message |",
           "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        mark = "" if r["pass"] else " **FAIL**"
        out.append(f"| {i} | {r['case']}{mark} | {r['exit']} | {r['lines']} | "
                   f"{'yes' if r['traceback'] else 'no'} | {'yes' if r['written'] else 'no'} | "
                   f"{_abbreviate(r['message'])} |")
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="case names to run (default: all 28)")
    parser.add_argument("--keep", help="run the cases in DIR/<case> and keep them")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "env_mistakes.json"))
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    rows = []
    for case in cases:
        if args.keep:
            folder = os.path.join(args.keep, case.name)
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            rows.append(run_case(case, folder))
        else:
            with tempfile.TemporaryDirectory() as folder:
                rows.append(run_case(case, folder))
        r = rows[-1]
        print(f"{case.name}: exit {r['exit']}, {r['lines']} line(s), "
              f"{'PASS' if r['pass'] else 'FAIL'} ({r['seconds']} s)", file=sys.stderr, flush=True)
    print(table(rows))
    print(f"\n{sum(r['pass'] for r in rows)} of {len(rows)} pass")
    if not args.only:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"command": "python bench/env_mistakes.py", "rows": rows}, f, indent=1)
    return 0 if all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
