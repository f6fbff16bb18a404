"""How long an alf example trains and how often it evaluates, read from its gin file, so
its seed study (bench/seed_benchmarks.py) and its SB3 peer (bench/sb3_runs.py) train for
the same env steps and evaluate the greedy policy at the same env steps with the same
number of episodes.

The gin file is read as text: ``name = value`` lines and ``include`` files (the
examples' bindings are plain literals); a ``TrainerConfig`` setting the file does not
bind has :class:`alf.trainers.trainer_config.TrainerConfig`'s default.

Evaluation: when the example evaluates at least :data:`MIN_EVALS` times per run, its own
``eval_interval`` is kept; otherwise (no evaluation, or too few points for a curve) the
plan binds ``TrainerConfig.evaluate=True`` and an ``eval_interval`` giving about
:data:`TARGET_EVALS` evaluations, with :data:`EVAL_EPISODES` episodes each. The Trainer
evaluates every ``eval_interval`` iterations and after the last one.
"""
import ast
import inspect
import math
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES_DIR = os.path.join(ROOT, "alf", "examples")
MIN_EVALS = 10
TARGET_EVALS = 15
EVAL_EPISODES = 10

_BINDING = re.compile(r"^\s*([\w./@]+)\s*=\s*(.+?)\s*$")
_INCLUDE = re.compile(r"""^\s*include\s+['"]([^'"]+)['"]""")


def gin_bindings(conf: str) -> Dict[str, str]:
    """``{name: value text}`` of the example ``conf`` (``"ppo_cart_pole.gin"`` or a path)
    and its includes; a later binding (the including file's, after its include) wins."""
    path = conf if os.path.isfile(conf) else os.path.join(EXAMPLES_DIR, conf)
    bindings: Dict[str, str] = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0]
            include = _INCLUDE.match(line)
            if include:
                bindings.update(gin_bindings(os.path.join(os.path.dirname(path),
                                                          include.group(1))))
                continue
            match = _BINDING.match(line)
            if match:
                bindings[match.group(1)] = match.group(2)
    return bindings


@dataclass
class EvalPlan:
    """Training length and evaluation schedule of one example.

    Attributes:
        env_name: the gymnasium env id.
        num_envs: training envs (``create_environment.num_parallel_environments``).
        num_env_steps: env steps of a run.
        steps_per_iteration: env steps of one training iteration (unroll x envs).
        eval_interval: iterations between evaluations.
        eval_episodes: episodes per evaluation.
        eval_envs: envs the episodes are split over.
        conf_params: bindings a run needs on top of the gin file (length, evaluation).
    """
    env_name: str
    num_envs: int
    num_env_steps: int
    steps_per_iteration: int
    eval_interval: int
    eval_episodes: int
    eval_envs: int
    conf_params: List[str]

    @property
    def eval_every_steps(self) -> int:
        """Env steps between two evaluations."""
        return self.eval_interval * self.steps_per_iteration


def _trainer_default(name: str):
    from alf.trainers.trainer_config import TrainerConfig
    return inspect.signature(TrainerConfig.__init__).parameters[name].default


def eval_plan(conf: str, num_env_steps: Optional[int] = None) -> EvalPlan:
    """The plan of example ``conf`` (module docstring), ``num_env_steps`` overriding the
    gin file's run length."""
    b = gin_bindings(conf)

    def trainer(name: str, cast=int):
        value = b.get(f"TrainerConfig.{name}")
        return cast(ast.literal_eval(value) if value is not None else _trainer_default(name))

    num_envs = int(b.get("create_environment.num_parallel_environments", "1"))
    steps = int(num_env_steps or trainer("num_env_steps"))
    per_iteration = int(trainer("unroll_length", float)) * num_envs
    iterations = max(1, math.ceil(steps / per_iteration))
    evaluate = b.get("TrainerConfig.evaluate", "False").strip() == "True"
    interval, episodes = trainer("eval_interval"), trainer("num_eval_episodes")
    params = [f"TrainerConfig.num_env_steps={steps}"] if num_env_steps else []
    if not evaluate or iterations // interval < MIN_EVALS:
        interval, episodes = max(1, iterations // TARGET_EVALS), EVAL_EPISODES
        params += ["TrainerConfig.evaluate=True", f"TrainerConfig.eval_interval={interval}",
                   f"TrainerConfig.num_eval_episodes={episodes}"]
    return EvalPlan(env_name=ast.literal_eval(b["create_environment.env_name"]), num_envs=num_envs,
                    num_env_steps=steps, steps_per_iteration=per_iteration,
                    eval_interval=interval, eval_episodes=episodes,
                    eval_envs=trainer("num_eval_environments"), conf_params=params)
