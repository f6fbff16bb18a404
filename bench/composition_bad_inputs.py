"""45 bad inputs on the composition surface, each run as the real command.

    python bench/composition_bad_inputs.py [--only NAME ...] [--keep DIR]

Each case (the ``CASES`` table: Agent roles, reward weights, representation learners,
pretrained parts, evaluation-only builds, config typos, wrong types, missing files,
garbage checkpoints, nesting, algorithm/role pairs that do not fit) runs
``python -m alf.bin.train`` or ``python -m alf.bin.play`` in a fresh temporary folder,
and passes when:

- ``expect="error"`` (almost all): exit status 2, stderr holds exactly one line that is
  not an ``[alf]`` log line, that line is ``alf.bin.<cmd>: error: ...`` (no traceback),
  the message contains the case's ``says`` text, and nothing was written to the run
  directory (``train``: it does not exist or is empty; ``play``: no file of the trained
  run it reads was added, removed or changed);
- ``expect="ok"``: the input is one that must work (exit 0), e.g. a reward module without
  parameters and without an optimizer (issue 39 item 3).

A case marked ``waits_on`` belongs to another item of issue 39 (non-finite values: item
1; parameterless reward modules: item 3) and may fail until that item is merged. The
script prints one row per case and ``N of 45 pass``; its exit status is 0 when every case
passes. tests/bin/test_composition_bad_inputs.py runs a representative subset of the
same cases (through the tests' fork server, which runs each command as ``python -m``
would, without a cold start per command).
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# PPO+RND on CartPole, as small as a run gets (the base of most cases)
TINY_RND = """
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
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.evaluate = False
TrainerConfig.checkpoint_interval = 1000
"""

TINY_SAC_RND = """
include 'sac_rnd_pendulum.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
CriticNetwork.fc_layer_params = (8,)
RNDRewardModule.fc_layer_params = (8,)
RNDRewardModule.feature_size = 8
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 2
TrainerConfig.initial_collect_steps = 4
TrainerConfig.mini_batch_size = 8
TrainerConfig.evaluate = False
TrainerConfig.checkpoint_interval = 1000
"""

# a reward module without parameters (issue 39 item 3: needs neither an optimizer nor an
# overridden update)
COUNT_MODULE = '''
import torch
import alf
from alf.algorithms.reward_module import RewardModule


@alf.configurable
class ConstantBonus(RewardModule):
    """A bonus of 1 for every transition: no parameters."""
    uses_previous_step = False

    def __init__(self, observation_spec, action_spec, context=None, name="ConstantBonus",
                 **kwargs):
        super().__init__(observation_spec, action_spec, context=context, name=name,
                         **kwargs)

    def reward(self, prev_observation, prev_action, observation):
        return torch.ones(observation.shape[0])

    def loss(self, prev_observation, prev_action, observation):
        return torch.zeros(observation.shape[0])
'''


class Case(NamedTuple):
    """One bad input: ``params`` are ``--conf_param`` values on ``base`` (a gin text,
    written as ``case.gin``; ``--conf case.gin``); ``files`` are extra files written into
    the case's folder first (name -> text, or a ``FILE_MAKERS`` key in angle brackets);
    ``args`` extra flags; ``command`` ``"train"`` or ``"play"`` (play reads the trained
    run ``trained/``, made once); ``says``: text the one error line must contain."""
    name: str
    params: Tuple[str, ...] = ()
    says: str = ""
    base: str = TINY_RND
    command: str = "train"
    files: Tuple[Tuple[str, str], ...] = ()
    args: Tuple[str, ...] = ()
    expect: str = "error"
    waits_on: str = ""


PRETRAINED = ("PPOAlgorithm.actor_network_ctor=@p/pretrained",
              "p/pretrained.ctor=@ActorDistributionNetwork")


def _pre(checkpoint: str, *more: str) -> Tuple[str, ...]:
    return PRETRAINED + (f"p/pretrained.checkpoint='{checkpoint}'",) + more


CASES: List[Case] = [
    # ---- reward modules
    Case("reward_modules_called_in_gin", ("Agent.reward_modules=[@RNDRewardModule()]",),
         "without ()"),
    Case("reward_modules_not_a_list", ("Agent.reward_modules=@RNDRewardModule",),
         "must be a list"),
    Case("reward_modules_string", ("Agent.reward_modules=['RNDRewardModule']",),
         "must be a list"),
    Case("reward_module_typo", ("Agent.reward_modules=[@RNDRewardModul]",),
         "Did you mean: RNDRewardModule"),
    Case("reward_module_not_a_module", ("Agent.reward_modules=[@LatentDynamicsLearner]",
                                        "LatentDynamicsLearner.optimizer=@rnd/alf.optimizers.Adam()"),
         "is not a RewardModule"),
    Case("reward_module_without_optimizer", ("RNDRewardModule.optimizer=None",),
         "RNDRewardModule.optimizer"),
    Case("reward_module_param_typo", ("RNDRewardModule.feature_sise=8",),
         "Did you mean: feature_size"),
    Case("reward_module_gamma_out_of_range", ("RNDRewardModule.gamma=1.5",), "gamma"),
    Case("icm_single_step_batches", ("Agent.reward_modules=[@ICMRewardModule]",
                                     "ICMRewardModule.optimizer=@rnd/alf.optimizers.Adam()",
                                     "TrainerConfig.mini_batch_length=1"),
         "mini_batch_length to 2"),
    Case("parameterless_module_without_optimizer",
         ("Agent.reward_modules=[@ConstantBonus]",),
         base="import count_module\n" + TINY_RND, files=(("count_module.py", COUNT_MODULE),),
         expect="ok", waits_on="item 3"),
    # ---- reward weights
    Case("weights_too_many", ("Agent.reward_weights=[1.0, 0.5, 0.2]",), "needs 2"),
    Case("weights_too_few", ("Agent.reward_weights=[1.0]",), "needs 2"),
    Case("weights_non_finite", ("Agent.reward_weights=[1.0, 1e999]",), "reward_weights",
         waits_on="item 1"),
    Case("weights_string", ("Agent.reward_weights=[1.0, 'high']",), "reward_weights"),
    Case("weights_not_a_list", ("Agent.reward_weights=0.5",), "reward_weights"),
    Case("weights_schedule_class", ("Agent.reward_weights=[1.0, @LinearSchedule]",),
         "reward_weights"),
    # ---- representation learners
    Case("representation_not_a_learner",
         ("Agent.representation_learner_cls=@RNDRewardModule",),
         "not a RepresentationLearner"),
    Case("representation_in_a_list",
         ("Agent.representation_learner_cls=[@LatentDynamicsLearner]",),
         "representation_learner_cls"),
    Case("representation_without_optimizer",
         ("Agent.representation_learner_cls=@LatentDynamicsLearner",),
         "LatentDynamicsLearner.optimizer"),
    Case("representation_single_step_batches",
         ("Agent.representation_learner_cls=@LatentDynamicsLearner",
          "LatentDynamicsLearner.optimizer=@rnd/alf.optimizers.Adam()",
          "TrainerConfig.mini_batch_length=1"), "mini_batch_length to 2"),
    Case("recurrent_representation_single_step",
         ("Agent.representation_learner_cls=@LatentDynamicsLearner",
          "LatentDynamicsLearner.recurrent=True",
          "LatentDynamicsLearner.optimizer=@rnd/alf.optimizers.Adam()",
          "TrainerConfig.mini_batch_length=1"), "mini_batch_length to 2"),
    # ---- the RL algorithm and its roles
    Case("agent_inside_agent", ("Agent.rl_algorithm_cls=@Agent",), "cannot hold an Agent"),
    Case("rl_algorithm_not_an_algorithm", ("Agent.rl_algorithm_cls=@ValueNetwork",),
         "rl_algorithm_cls"),
    Case("rl_algorithm_typo", ("Agent.rl_algorithm_cls=@PPOAlgorith",), "PPOAlgorithm"),
    Case("reinforce_not_imported", ("Agent.rl_algorithm_cls=@ReinforceAlgorithm",),
         "import alf.examples.reinforce_algorithm"),
    Case("dyna_not_imported", ("Agent.rl_algorithm_cls=@DynaDqn",),
         "import alf.examples.dyna_dqn"),
    Case("agent_around_dyna_dqn", ("Agent.rl_algorithm_cls=@DynaDqnAlgorithm",),
         "its own learner", base="import alf.examples.dyna_dqn\n" + TINY_RND),
    Case("dqn_on_continuous_actions", ("Agent.rl_algorithm_cls=@DqnAlgorithm",), "Dqn",
         base=TINY_SAC_RND),
    Case("value_per_column_for_sac", ("Agent.value_per_reward_column=True",),
         "value_per_reward_column", base=TINY_SAC_RND),
    Case("agent_param_typo", ("Agent.reward_module=[@RNDRewardModule]",),
         "Did you mean: reward_modules"),
    Case("agent_called_in_gin", ("TrainerConfig.algorithm_ctor=@Agent()",), "without ()"),
    Case("encoder_flag_wrong_type", ("Agent.encoder_trained_by_rl='yes'",),
         "encoder_trained_by_rl"),
    # ---- pretrained parts
    Case("pretrained_missing_path", _pre("_actor_network@nowhere/run"), "does not exist"),
    Case("pretrained_garbage_file", _pre("_actor_network@garbage.pt"),
         "cannot read garbage.pt: not a torch file (3,000 bytes",
         files=(("garbage.pt", "<random>"),)),
    Case("pretrained_pickled_objects", _pre("_actor_network@objects.pt"),
         "cannot read objects.pt: not a checkpoint of tensors",
         files=(("objects.pt", "<objects>"),)),
    Case("pretrained_empty_file", _pre("_actor_network@empty.pt"), "empty file",
         files=(("empty.pt", ""),)),
    Case("pretrained_empty_run_dir", _pre("_actor_network@emptyrun"), "holds no checkpoint",
         files=(("emptyrun/train/.keep", ""),)),
    Case("pretrained_wrong_prefix", _pre("_rl._actr_network@../trained"), "matches no key"),
    Case("pretrained_shape_mismatch",
         _pre("_rl._actor_network@../trained", "p/ActorDistributionNetwork.fc_layer_params=(16,)"),
         "shape mismatch"),
    Case("pretrained_ctor_unset", ("PPOAlgorithm.actor_network_ctor=@p/pretrained",
                                   "p/pretrained.checkpoint='_actor_network@../trained'"),
         "ctor is not set"),
    Case("pretrained_checkpoint_unset", PRETRAINED, "checkpoint is not set"),
    # ---- play (evaluation-only builds) of the trained PPO+RND run
    Case("play_garbage_checkpoint", (), "is readable", command="play", args=("--corrupt",)),
    Case("play_missing_root_dir", (), "not found", command="play",
         args=("--root_dir=nowhere",)),
    Case("play_conf_param_typo", ("Agent.reward_weight=[1.0, 0.5]",),
         "Did you mean: reward_weights", command="play"),
    Case("play_wrong_reward_module_count",
         ("Agent.reward_modules=[@RNDRewardModule, @RNDRewardModule]",), "reward_weights",
         command="play"),
]


def _random_bytes(path: str) -> None:
    with open(path, "wb") as f:
        f.write(random.Random(0).randbytes(3000))


def _pickled_objects(path: str) -> None:
    import numpy as np
    import torch
    torch.save({"weights": np.zeros(3)}, path)  # numpy arrays: refused by weights_only


FILE_MAKERS = {"<random>": _random_bytes, "<objects>": _pickled_objects}


def prepare(case: Case, folder: str) -> List[str]:
    """Write the case's files into ``folder``; returns the command's arguments (after
    ``-m alf.bin.<command>``)."""
    for name, text in case.files:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if text in FILE_MAKERS:
            FILE_MAKERS[text](path)
        else:
            with open(path, "w") as f:
                f.write(text)
    args = [a for a in case.args if a != "--corrupt"]
    if case.command == "play":
        if not any(a.startswith("--root_dir") for a in args):
            args.append(f"--root_dir={os.path.join(folder, 'run')}")
        args += ["--num_episodes=1"]
    else:
        with open(os.path.join(folder, "case.gin"), "w") as f:
            f.write(textwrap.dedent(case.base).lstrip())
        args += ["--conf=case.gin", f"--root_dir={os.path.join(folder, 'run')}"]
    for p in case.params:
        args.append(f"--conf_param={p}")
    return args


def snapshot(root: str) -> Dict[str, Tuple[int, float]]:
    """Every file under ``root``: (size, mtime)."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            st = os.stat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime)
    return out


def error_lines(stderr: str) -> List[str]:
    """The stderr lines that are not ``[alf]`` log lines."""
    return [l for l in stderr.splitlines() if l.strip() and not l.startswith("[alf]")]


def judge(case: Case, status: int, stderr: str, before: Optional[Dict],
          after: Dict) -> str:
    """'' when the case passes, else why not (one short phrase)."""
    lines = error_lines(stderr)
    if case.expect == "ok":
        return "" if status == 0 else f"exit {status}: {(lines or ['?'])[-1][:150]}"
    why = []
    if status != 2:
        why.append(f"exit {status}")
    if "Traceback" in stderr:
        why.append(f"traceback ({len(stderr.splitlines())} lines)")
    elif len(lines) != 1:
        why.append(f"{len(lines)} error lines")
    elif not lines[0].startswith(f"alf.bin.{case.command}: error: "):
        why.append("not an alf error line")
    elif case.says and case.says not in lines[0]:
        why.append(f"does not say {case.says!r}")
    if before is None and after:
        why.append(f"wrote {', '.join(sorted(after)[:3])}")
    elif before is not None and before != after:
        why.append("changed the run directory")
    return "; ".join(why)


def train_play_run(folder: str, env: Dict[str, str]) -> None:
    """The trained PPO+RND run that play cases and pretrained cases read (kept when
    ``folder/trained`` holds one: ``--keep`` reruns)."""
    if os.path.isdir(os.path.join(folder, "trained", "train")):
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "trained.gin"), "w") as f:
        f.write(textwrap.dedent(TINY_RND).lstrip())
    p = subprocess.run([sys.executable, "-m", "alf.bin.train", "--conf=trained.gin",
                        "--root_dir=trained"], cwd=folder, env=env, capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"training the run the play cases read failed:\n{p.stderr[-3000:]}")


def run_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def case_folder(base: str, case: Case) -> str:
    """The case's folder under ``base`` (beside ``base/trained``); play cases get a copy
    of the trained run as their ``run``."""
    folder = os.path.join(base, case.name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    if case.command == "play":
        shutil.copytree(os.path.join(base, "trained"), os.path.join(folder, "run"))
        if "--corrupt" in case.args:
            ckpts = sorted(os.listdir(os.path.join(folder, "run", "train")))
            for c in ckpts:
                _random_bytes(os.path.join(folder, "run", "train", c))
    return folder


def run_case(case: Case, base: str, env: Dict[str, str], timeout: float = 300
             ) -> Tuple[str, int, str]:
    """Run one case; returns (why it failed or '', exit status, stderr)."""
    folder = case_folder(base, case)
    args = prepare(case, folder)
    root = os.path.join(folder, "run")
    before = snapshot(root) if case.command == "play" else None
    p = subprocess.run([sys.executable, "-m", f"alf.bin.{case.command}", *args], cwd=folder,
                       env=env, capture_output=True, text=True, timeout=timeout)
    after = snapshot(root) if os.path.isdir(root) else {}
    with open(os.path.join(folder, "stderr.txt"), "w") as f:
        f.write(p.stderr)
    return judge(case, p.returncode, p.stderr, before, after), p.returncode, p.stderr


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="run only these cases (by name)")
    parser.add_argument("--keep", help="run in this folder and keep it (default: a temp dir)")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    base = args.keep or tempfile.mkdtemp(prefix="alf_bad_inputs_")
    env = run_env()
    train_play_run(base, env)
    passed = 0
    print(f"{'case':<40} {'cmd':<5} {'exit':>4}  result")
    for case in cases:
        why, status, stderr = run_case(case, base, env)
        passed += not why
        wait = f" [waits on {case.waits_on}]" if why and case.waits_on else ""
        print(f"{case.name:<40} {case.command:<5} {status:>4}  {why or 'pass'}{wait}",
              flush=True)
        if why and (error_lines(stderr) or stderr):
            print(f"{'':<40} stderr: {(error_lines(stderr) or stderr.splitlines())[-1][:200]}")
    print(f"{passed} of {len(cases)} pass")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
