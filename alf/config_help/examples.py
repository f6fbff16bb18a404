"""The bundled example ``.gin`` files, for ``--list_examples``.

Each ``alf/examples/*.gin`` is listed with its one-line description (the first
comment line of the file) and the pip extra its env needs. Files that set no
algorithm (``TrainerConfig.algorithm_ctor``), themselves or through an
``include``, are listed apart as the shared settings that examples include.
"""
import dataclasses
import os
import re
from typing import List, Optional

import gymnasium

from alf.config import EXAMPLES_DIR
from alf.example_catalog import env_name_of, example_texts


@dataclasses.dataclass
class Example:
    """A bundled ``.gin`` file: its bare name, first comment line, and whether it is a whole
    experiment (it binds ``TrainerConfig.algorithm_ctor``, itself or through an ``include``)
    rather than shared settings that experiments include."""
    name: str
    description: str
    runnable: bool
    env_name: Optional[str] = None   # the create_environment.env_name it binds, if any
    extra: Optional[str] = None      # the pip extra that env needs: "atari", "mujoco"


_SETS_ALGORITHM = re.compile(r"^\s*TrainerConfig\.algorithm_ctor\s*=", re.MULTILINE)


def env_extra(env_name: str) -> Optional[str]:
    """The ``pip install -e ".[extra]"`` an env id needs (``atari``, ``mujoco``), or None."""
    if env_name.startswith("ALE/"):
        return "atari"
    spec = gymnasium.envs.registry.get(env_name)
    entry = str(getattr(spec, "entry_point", "") or "")
    return "mujoco" if "mujoco" in entry else None


NO_DESCRIPTION = "(no description: the file should start with a '# ...' line)"


def _first_comment_line(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            description = stripped.lstrip("#").strip()
            if description:
                return description
            continue
        break  # a statement before any comment
    return NO_DESCRIPTION


def list_examples(directory: str = EXAMPLES_DIR) -> List[Example]:
    """The ``*.gin`` files of ``directory``, sorted by name."""
    examples = []
    for name, full in example_texts(directory).items():
        with open(os.path.join(directory, name)) as f:
            own = f.read()
        env = env_name_of(full)
        examples.append(Example(name, _first_comment_line(own),
                                bool(_SETS_ALGORITHM.search(full)), env,
                                env_extra(env) if env else None))
    return examples


def format_examples(invocation: str = "python -m alf.bin.train") -> str:
    """The text ``--list_examples`` prints: one line per example, then how to run one."""
    examples = list_examples()
    runnable = [e for e in examples if e.runnable]
    shared = [e for e in examples if not e.runnable]
    width = max(len(e.name) for e in examples) + 2
    lines = [f"Bundled examples ({EXAMPLES_DIR}); pass the bare name to --conf:"]
    lines += [f"  {e.name:<{width}}{e.description}" + (f" [{e.extra}]" if e.extra else "")
              for e in runnable]
    if shared:
        lines += ["", "Shared settings that the examples above include (not run on their own):"]
        lines += [f"  {e.name:<{width}}{e.description}" for e in shared]
    extras = sorted({e.extra for e in runnable if e.extra})
    if extras:
        lines += ["", "[" + "], [".join(extras) + "]: needs that extra first, e.g. "
                  f"pip install -e \".[{extras[0]}]\" (see README.md)."]
    first = next((e.name for e in runnable if e.name == "ppo_cart_pole.gin"),
                 runnable[0].name if runnable else "ppo_cart_pole.gin")
    lines += ["", f"Run one:         {invocation} --conf={first} "
                  f"--root_dir=runs/{first[:-len('.gin')]}",
              f"What can be set: {invocation} --describe PPOAlgorithm "
              "(or any of --list_configurables)",
              f"What one sets:   {invocation} --conf={first} --describe PPOAlgorithm"]
    return "\n".join(lines)
