"""Run one doc's commands in order, in a fresh working directory, shortened.

Commands of one file share its working directory, in document order, so a
command finds what an earlier one made (``play`` a trained ``root_dir``, train
offline on an exported dataset), exactly as a reader going down the page would.
What the runner changes, and nothing else:

- training (``alf.bin.train``, under torchrun too) gets ``--conf_param`` overrides
  appended: ``TrainerConfig.num_iterations`` = 2 x (how many times this file has
  trained that ``root_dir``, so a rerun resumes and trains 2 more),
  ``num_env_steps=0``, ``evaluate=False``, ``num_updates_per_train_iter=1``, and
  for bundled examples with big envs or buffers the :data:`TINY` settings;
  ``--list_*``/``--describe``/``--help`` and commands whose doc output is an
  error run as written;
- ``alf.bin.sweep`` / ``alf.bin.pbt``: every run they start gets :data:`STUDY_SHORT`
  (2 iterations of PPO CartPole, evaluating at the last); a sweep runs each
  configuration with its first seed only; a PBT population is 2 members (the
  exploit step still has one to replace; ``tests/studies/test_pbt_runs.py`` runs 4)
  training ``--num_env_steps=1024`` in ``--interval=512`` segments;
- ``alf.bin.compare``: each ``--group`` glob that matches nothing gets synthetic runs
  first (``doc_synthetic_runs.py``), unless the doc shows the command failing;
- ``alf.bin.play`` gets ``--max_episode_steps=200``; ``alf.bin.export_dataset`` in
  collect mode ``--collect_steps=200`` and, with ``--checkpoint``, the newest
  iteration the shortened run reached;
- absolute paths under ``/tmp/`` and the placeholder ``/path/to/`` move into the
  working directory; a doc block that starts with a ``# name.py``/``# name.gin``
  line is a file the reader is asked to save: it is written to ``path/to/name``;
- torchrun gets a free port (``PET_MASTER_PORT``), Minari a private cache
  (``MINARI_DATASETS_PATH``);
- a fragment (a block of flags) is appended to the file's previous command.

``python -m``/``alf-*`` commands run as forks of a process that imported alf once
(``tests/fork_server.py``: it saves ~2.5 s of CPU per command); torchrun runs as a
plain subprocess. ``ALF_DOC_COMMANDS_FORK=0`` runs every command as a fresh
interpreter instead.
"""
import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from doc_command_parser import DocCommand, fenced_files
from doc_command_plan import Part, plan
from fork_client import ForkServer, needs_fresh_interpreter
from doc_synthetic_runs import make_runs

COMMAND_TIMEOUT_S = 240
FORK = os.environ.get("ALF_DOC_COMMANDS_FORK", "1") != "0"
INFO_FLAGS = ("--list_examples", "--list_configurables", "--describe", "--help", "--helpfull")
SHORT = ["TrainerConfig.num_env_steps=0", "TrainerConfig.evaluate=False",
         "TrainerConfig.num_updates_per_train_iter=1"]
#: what each run of a sweep or PBT member gets: 2 iterations, evaluated at the last
STUDY_SHORT = ["TrainerConfig.num_env_steps=512", "TrainerConfig.eval_interval=1000",
               "TrainerConfig.num_eval_episodes=1", "TrainerConfig.num_updates_per_train_iter=1"]
_TWO_ENVS = ["create_environment.num_parallel_environments=2"]
_SMALL_REPLAY = ["TrainerConfig.replay_buffer_length=1000", "TrainerConfig.mini_batch_size=16"]
#: extra settings per bundled example, so that 2 iterations take seconds
TINY: Dict[str, List[str]] = {
    "ppo_atari.gin": _TWO_ENVS + ["TrainerConfig.unroll_length=16",
                                  "TrainerConfig.mini_batch_size=16"],
    "appo_atari.gin": _TWO_ENVS + ["TrainerConfig.unroll_length=16",
                                   "TrainerConfig.mini_batch_size=16"],
    "impala_atari.gin": _TWO_ENVS + ["TrainerConfig.unroll_length=8"],
    "dqn_atari.gin": _TWO_ENVS + ["TrainerConfig.replay_buffer_length=64",
                                  "TrainerConfig.initial_collect_steps=16",
                                  "TrainerConfig.mini_batch_size=8"],
    "dqn_cart_pole.gin": ["TrainerConfig.initial_collect_steps=64"],
    "dyna_dqn_cart_pole.gin": ["TrainerConfig.initial_collect_steps=16"],
    "ppo_halfcheetah.gin": _TWO_ENVS + ["TrainerConfig.unroll_length=32"],
    "sac_pendulum.gin": ["TrainerConfig.replay_buffer_length=1000"],
    "hybrid_sac_pendulum.gin": ["TrainerConfig.replay_buffer_length=1000"],
    "sac_halfcheetah.gin": _SMALL_REPLAY + ["TrainerConfig.initial_collect_steps=16"],
    "td3_halfcheetah.gin": _SMALL_REPLAY + ["TrainerConfig.initial_collect_steps=16"],
    "hybrid_sac_halfcheetah.gin": _SMALL_REPLAY,
}
_PLACEHOLDER_DIRS = re.compile(r"(?<![\w.])/(tmp|path/to)/")


@dataclasses.dataclass
class CommandResult:
    """What running (or not running) one doc command gave.

    Attributes:
        command: the doc command.
        ran: the argv of every part that ran.
        not_run: the reasons of the parts that did not run.
        problems: what is wrong (empty: the command is fine).
        seconds: wall time of the parts that ran.
        output: the tail of their stdout and stderr.
    """
    command: DocCommand
    ran: List[List[str]] = dataclasses.field(default_factory=list)
    not_run: List[str] = dataclasses.field(default_factory=list)
    problems: List[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    output: str = ""

    def report(self) -> str:
        lines = [f"{self.command.where()}: {self.command.text}"]
        lines += [f"  ran: {' '.join(a)}" for a in self.ran]
        lines += [f"  problem: {p}" for p in self.problems]
        if self.problems and self.output:
            lines.append("  output (tail):\n" + self.output[-3000:])
        return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _flag(argv: List[str], name: str) -> Optional[str]:
    """The value of ``--name=v`` / ``--name v`` in ``argv`` (the last one), else None."""
    value = None
    for i, w in enumerate(argv):
        if w.startswith(f"--{name}="):
            value = w.split("=", 1)[1]
        elif w == f"--{name}" and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def expected_status(command: DocCommand) -> int:
    """2 when the doc shows the command printing an error (docs: "exit status 2"), else 0."""
    return 2 if any(": error:" in line for line in command.output) else 0


def output_pattern(line: str) -> "re.Pattern":
    """A doc output line as a pattern: ``...`` elides anything, a path such as
    ``/home/me`` stands for any path, runs of spaces for any whitespace."""
    pieces = []
    for word in line.split():
        if "..." in word:
            pieces.append(".*".join(re.escape(p) for p in word.split("...")))
        elif word.startswith("/"):
            pieces.append(r"\S*")
        else:
            pieces.append(re.escape(word))
    return re.compile(r"\s+".join(pieces))


class FileRun:
    """Runs the commands of one doc file in ``workdir`` (see the module docstring)."""

    def __init__(self, doc_file: str, workdir: str, base_env: Dict[str, str]):
        self.doc_file = doc_file
        self.workdir = workdir
        self.base_env = dict(base_env, MINARI_DATASETS_PATH=os.path.join(workdir, "minari"))
        self.trains: Dict[str, int] = {}   # root_dir -> training commands so far
        self.conf_of: Dict[str, str] = {}  # root_dir -> its --conf (bare name)
        self.previous: Optional[str] = None  # the text of the previous command that ran
        self.server: Optional[ForkServer] = None
        os.makedirs(workdir, exist_ok=True)
        # a doc's files are saved where its commands run (``--conf=corridor.gin``) and
        # where a placeholder path points (``--conf=/path/to/my_a2c.gin``)
        for name, text in fenced_files(doc_file).items():
            for path in (os.path.join(workdir, "path", "to", name), os.path.join(workdir, name)):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)

    # ------------------------------------------------------------- shortening
    def _rebase(self, word: str) -> str:
        return _PLACEHOLDER_DIRS.sub(lambda m: f"{self.workdir}/{m.group(1)}/", word)

    def _root(self, argv: List[str]) -> Optional[str]:
        root = _flag(argv, "root_dir")
        return os.path.normpath(os.path.join(self.workdir, root)) if root else None

    def shortened(self, part: Part, expected: int) -> List[str]:
        """The argv to run for ``part`` (module docstring)."""
        argv = [self._rebase(w) for w in part.argv]
        extra: List[str] = []
        info = any(w.split("=")[0] in INFO_FLAGS for w in argv)
        root = self._root(argv)
        if part.kind == "train" and not info and expected == 0:
            conf = _flag(argv, "conf")
            if root and conf:
                self.conf_of.setdefault(root, os.path.basename(conf))
            count = self.trains[root] = self.trains.get(root, 0) + 1
            bindings = ([f"TrainerConfig.num_iterations={2 * count}"] + SHORT
                        + TINY.get(self.conf_of.get(root, ""), []))
            for b in bindings:
                extra += ["--conf_param", b]
        elif part.kind in ("sweep", "pbt") and not info:
            for b in STUDY_SHORT[part.kind == "pbt":]:  # PBT sets num_env_steps itself
                extra += ["--conf_param", b]
            if part.kind == "pbt":  # 2 members: still one in the bottom quantile
                extra += ["--num_env_steps=1024", "--interval=512", "--population=2"]
            elif _flag(argv, "seeds"):  # every configuration once: its first seed
                extra.append(f"--seeds={_flag(argv, 'seeds').split(',')[0]}")
        elif part.kind == "compare" and not info and expected == 0:
            make_runs(self.workdir, argv)
        elif part.kind == "play":
            extra.append("--max_episode_steps=200")
        elif part.kind == "export" and _flag(argv, "collect_steps") is not None:
            extra.append("--collect_steps=200")
            if _flag(argv, "checkpoint") is not None and root in self.trains:
                extra.append(f"--checkpoint={2 * self.trains[root]}")
        if argv[0] in ("python", "python3"):
            argv = [sys.executable] + argv[1:]
        elif argv[0] == "torchrun":
            argv = [sys.executable, "-m", "torch.distributed.run"] + argv[1:]
        else:  # an alf-* console script: the same module
            argv = [sys.executable, "-m", part.module] + argv[1:]
        return argv + extra

    # ---------------------------------------------------------------- running
    def run(self, command: DocCommand) -> CommandResult:
        result = CommandResult(command)
        text = command.text
        if command.source == "fragment":
            if self.previous is None:
                result.problems.append("a block of flags with no command before it to add "
                                       "them to")
                return result
            text = f"{self.previous} {command.text}"
        parts = plan(command, text)
        expected = expected_status(command)
        for part in parts:
            if part.action == "unknown":
                result.problems.append(part.reason)
            elif part.action in ("not_run", "pip"):
                result.not_run.append(part.reason or "pip install: extras checked")
            else:
                self._run_part(part, expected, result)
                self.previous = text
            if result.problems:
                break
        return result

    def _run_part(self, part: Part, expected: int, result: CommandResult) -> None:
        argv = self.shortened(part, expected)
        env = dict(self.base_env, **part.env)
        if part.argv[0] == "torchrun":
            env["PET_MASTER_PORT"] = str(_free_port())
            env["TMPDIR"] = self.workdir  # torchrun leaves its torchelastic_* logs there
        result.ran.append(argv)
        start = time.monotonic()
        forkable = FORK and argv[1:3] == ["-m", part.module]
        if forkable and self.server is None:
            self.server = ForkServer(self.base_env)
        if forkable and self.server.usable and \
                not needs_fresh_interpreter(env, self.server.env):
            status, output, timed_out = self.server.run(part.module, argv[3:], self.workdir,
                                                        env, COMMAND_TIMEOUT_S)
        else:
            status, output, timed_out = _subprocess(argv, self.workdir, env)
        if timed_out:
            result.problems.append(f"still running after {COMMAND_TIMEOUT_S} s (shorten it "
                                   "in TINY, or list it in NOT_RUN with the reason)")
        result.seconds += time.monotonic() - start
        result.output += output
        if status != expected:
            result.problems.append(f"exit status {status}, expected {expected}")
        self._check_output(part, argv, output, result)
        if status == 0 and not result.problems:
            self._check_artifacts(part, argv, result)

    def _check_output(self, part: Part, argv: List[str], output: str,
                      result: CommandResult) -> None:
        if "Traceback (most recent call last)" in output:
            result.problems.append("printed a traceback")
        if "gin bindings never used" in output:
            result.problems.append("warned about gin bindings that the run never used")
        shown = result.command.output
        for line in shown:
            if not output_pattern(line).search(output):
                result.problems.append(f"the doc shows this output, the command did not "
                                       f"print it: {line}")
        # lines wrapped to the terminal's width (indented continuations) count once
        printed = [l for l in output.splitlines() if l.strip() and not l[:1].isspace()]
        if shown and "..." not in shown and len(printed) != len(shown):
            result.problems.append(f"printed {len(printed)} lines, the doc shows {len(shown)}")

    def _check_artifacts(self, part: Part, argv: List[str], result: CommandResult) -> None:
        """What the command must have written."""
        info = any(w.split("=")[0] in INFO_FLAGS for w in argv)
        root = self._root(argv)
        wanted = []
        if part.kind == "train" and not info and root:
            wanted.append(os.path.join(root, "config.gin"))
            train_dir = os.path.join(root, "train")
            if not (os.path.isdir(train_dir) and any(f.startswith("ckpt-")
                                                     for f in os.listdir(train_dir))):
                result.problems.append(f"no checkpoint in {train_dir}")
        elif part.kind == "export":
            wanted.append(os.path.join(self.workdir, _flag(argv, "out"), "alf_dataset.json"))
        elif part.kind in ("sweep", "pbt") and not info:
            study = os.path.join(self.workdir, _flag(argv, "study_dir"))
            wanted.append(os.path.join(study, "results.md" if part.kind == "sweep" else
                                       "lineage.csv"))
        elif part.kind == "compare" and _flag(argv, "out_dir") and not info:
            wanted += [os.path.join(self.workdir, _flag(argv, "out_dir"), name) for name in
                       ("compare.md", "compare.json", "curves.png", "profile.png",
                        "aggregates.png")]
        elif part.kind == "play" and _flag(argv, "record_video"):
            wanted.append(os.path.join(self.workdir, _flag(argv, "record_video")))
        for path in wanted:
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                result.problems.append(f"did not write {os.path.relpath(path, self.workdir)}")


def _subprocess(argv: List[str], cwd: str, env: Dict[str, str]) -> Tuple[int, str, bool]:
    """Run ``argv`` as a fresh process: (exit status, output, whether it timed out)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        return proc.returncode, output, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and its ranks
        output, _ = proc.communicate()
        return proc.returncode, output, True


def run_file(doc_file: str, commands: List[DocCommand], workdir: str,
             base_env: Dict[str, str]) -> List[CommandResult]:
    """Run the commands of ``doc_file`` (in document order) in ``workdir``."""
    runner = FileRun(doc_file, workdir, base_env)
    try:
        return [runner.run(c) for c in commands]
    finally:
        if runner.server is not None:
            runner.server.close()
