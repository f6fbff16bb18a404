"""What the docs test does with each doc command, and the commands it does not run.

A doc command is split into parts at ``&&``; each part is

- **run** (``python -m alf.bin.train/play/export_dataset/minari_dataset``, their
  ``alf-*`` console scripts, ``torchrun ... -m alf.bin.train``), shortened by the
  runner (``doc_command_runner.py``);
- **checked, not run**: ``pip install`` (installing would change the environment
  the tests run in; CI's own first step is README's install command): the extras
  it names must exist in ``setup.py``;
- **not run**, matched by an entry of :data:`NOT_RUN` with the reason;
- anything else is **unrecognised** and fails the test: teach the runner to run
  it or add it to :data:`NOT_RUN` with a reason, so no new doc command escapes.
"""
import dataclasses
import re
import shlex
from typing import Dict, List, Optional, Tuple

from doc_command_parser import DocCommand

#: (regular expression searched in a command's text, why the test does not run it)
NOT_RUN: List[Tuple[str, str]] = [
    (r"-m pytest\b", "runs this test suite (or part of it), which CI runs anyway"),
    (r"^tensorboard ", "starts a web server that runs until stopped"),
    (r"^(\w+=\S* )*python3? bench/",
     "a benchmark (bench/): minutes of measurement, several need stable-baselines3, "
     "d3rlpy's own venv, a GPU or long training runs first; the test checks the script "
     "exists"),
    (r"^(\w+=\S* )*bash bench/gpu_side_by_side/",
     "the GPU side-by-side benchmark: fetch_wheels.sh downloads its wheels (network), "
     "run.sh needs a CUDA GPU, those wheels and Sample Factory's Python 3.12 target"),
    (r"--master_addr=HOST0", "multi-host torchrun: HOST0 stands for a second machine"),
    (r"--nproc_per_node=N\b", "N stands for any number of ranks"),
    (r"^torchrun --nproc_per_node=2$", "the launcher flag quoted in prose, not a command"),
    (r"--conf=/path/to/my\.gin", "/path/to/my.gin stands for the reader's own gin file"),
    (r"minari_dataset import --id=mujoco/",
     "needs that Minari dataset in the local cache (`minari download`, network access)"),
    (r"^wandb sync ", "uploads to wandb.ai: needs network access and a W&B account"),
    (r"venv_robotics",
     "builds the separate gymnasium-robotics venv (mujoco 3.10, which the main venv's "
     "mujoco 4.x for the locomotion examples excludes); tests/examples/test_fetch_reach_her.py "
     "trains sac_her_fetch_reach.gin where it is installed"),
    (r"--(study|root)_dir=runs/results/",
     "a row of docs/results.md: hours of training at the field's budget; "
     "tests/docs/test_results_page.py parses it (its --conf exists, every --conf_param "
     "binds)"),
    (r"--root_dir=runs/offline/hybrid_hc_seed0",
     "trains on runs/offline/data/halfcheetah_medium, which bench/offline_pipeline.py "
     "(a benchmark, not run) makes"),
]

#: alf's commands: module -> kind
ALF_MODULES = {"alf.bin.train": "train", "alf.bin.play": "play",
               "alf.bin.export_dataset": "export", "alf.bin.minari_dataset": "minari",
               "alf.bin.sweep": "sweep", "alf.bin.pbt": "pbt", "alf.bin.compare": "compare"}
#: console scripts (setup.py entry_points) -> module
CONSOLE_SCRIPTS = {"alf-train": "alf.bin.train", "alf-play": "alf.bin.play",
                   "alf-export-dataset": "alf.bin.export_dataset",
                   "alf-minari": "alf.bin.minari_dataset", "alf-sweep": "alf.bin.sweep",
                   "alf-pbt": "alf.bin.pbt", "alf-compare": "alf.bin.compare"}


@dataclasses.dataclass
class Part:
    """One simple command of a doc command (the text between ``&&``).

    Attributes:
        env: ``NAME=value`` assignments in front of it.
        argv: its words, as the shell would pass them (quotes removed, comments dropped,
            a ``[--optional thing]`` of the doc included without its brackets).
        action: ``"run"``, ``"pip"``, ``"not_run"`` or ``"unknown"``.
        kind: for ``"run"``: ``"train"``, ``"play"``, ``"export"``, ``"minari"``, ``"sweep"``,
            ``"pbt"`` or ``"compare"``.
        module: the alf module it runs (``"run"`` only).
        reason: why it is not run (``"not_run"``) or what is wrong (``"unknown"``).
    """
    env: Dict[str, str]
    argv: List[str]
    action: str
    kind: str = ""
    module: str = ""
    reason: str = ""


def words(text: str) -> List[List[str]]:
    """The words of each ``&&``-separated part of ``text`` (shell quoting and comments);
    raises ValueError on other shell operators (pipes, ``;``, redirections)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    parts: List[List[str]] = [[]]
    for token in lexer:
        if token == "&&":
            parts.append([])
        elif token and set(token) <= set("();<>|&"):
            raise ValueError(f"shell operator {token!r} is not supported by the docs test")
        else:
            parts[-1].append(token)
    return [p for p in parts if p]


def _without_optional_brackets(argv: List[str]) -> List[str]:
    """``[--record_video x.mp4]`` (the doc's notation for an optional part) -> included."""
    out = []
    for w in argv:
        if w.startswith("[") and len(w) > 1:
            w = w[1:]
        if w.endswith("]") and len(w) > 1 and "[" not in w:
            w = w[:-1]
        out.append(w)
    return out


def not_run_reason(text: str) -> Optional[str]:
    for pattern, reason in NOT_RUN:
        if re.search(pattern, text):
            return reason
    return None


def classify_part(argv: List[str], env: Dict[str, str], text: str) -> Part:
    """What the test does with one part (``text``: the whole doc command, for NOT_RUN)."""
    reason = not_run_reason(text)
    if reason is not None:
        return Part(env, argv, "not_run", reason=reason)
    program = argv[0]
    if program in ("pip", "pip3") and argv[1:2] == ["install"]:
        return Part(env, argv, "pip")
    module = None
    if program in ("python", "python3") and argv[1:2] == ["-m"] and len(argv) > 2:
        module = argv[2]
    elif program in CONSOLE_SCRIPTS:
        module = CONSOLE_SCRIPTS[program]
    elif program == "torchrun" and "-m" in argv:
        module = argv[argv.index("-m") + 1]
    if module in ALF_MODULES:
        return Part(env, _without_optional_brackets(argv), "run", ALF_MODULES[module], module)
    return Part(env, argv, "unknown",
                reason="unrecognised command: teach tests/docs/doc_command_runner.py to run "
                       "it, or add it to NOT_RUN in tests/docs/doc_command_plan.py with the "
                       "reason it cannot run in CI")


def plan(command: DocCommand, text: Optional[str] = None) -> List[Part]:
    """The parts of ``command`` (or of ``text``, e.g. a fragment joined to its command)."""
    text = command.text if text is None else text
    try:
        split = words(text)
    except ValueError as e:
        return [Part({}, [], "unknown", reason=str(e))]
    parts = []
    for argv in split:
        env = {}
        while argv and re.match(r"^[A-Za-z_]\w*=", argv[0]):
            name, _, value = argv.pop(0).partition("=")
            env[name] = value
        if argv:
            parts.append(classify_part(argv, env, text))
    return parts


def pip_extras(argv: List[str]) -> List[str]:
    """The extras a ``pip install ... -e ".[a,b]"`` names."""
    extras = []
    for w in argv:
        m = re.match(r"^\.\[([\w,-]+)\]$", w)
        if m:
            extras += m.group(1).split(",")
    return extras
