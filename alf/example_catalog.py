"""The bundled example gin files as data: which algorithm and env each one runs.

Used where a message should point at an example (``--list_examples``, and an
algorithm refusing a setting: "use APPOAlgorithm, e.g. --conf=appo_cart_pole.gin"),
so the suggestion fits the user's env instead of naming one fixed file. The files
are read as text (``include`` lines expanded, later bindings win); nothing is parsed
with gin, so this works while a config is being built.
"""
import os
import re
from typing import Dict, List, Optional, Tuple

import gin

from alf.config import EXAMPLES_DIR

_INCLUDE = re.compile(r"""^\s*include\s+['"]([^'"]+)['"]""")
_ALGORITHM = re.compile(r"^\s*TrainerConfig\.algorithm_ctor\s*=\s*@([\w.]+)", re.MULTILINE)
_ENV_NAME = re.compile(r"""^\s*create_environment\.env_name\s*=\s*['"]([^'"]+)['"]""",
                       re.MULTILINE)


def example_texts(directory: str = EXAMPLES_DIR) -> Dict[str, str]:
    """Bare name -> the text of each ``*.gin`` of ``directory`` with its bundled includes in
    place, sorted by name."""
    texts = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".gin"):
            with open(os.path.join(directory, name)) as f:
                texts[name] = f.read()

    def expanded(name: str, seen: Tuple[str, ...] = ()) -> str:
        out = []
        for line in texts.get(name, "").splitlines():
            m = _INCLUDE.match(line)
            include = os.path.basename(m.group(1)) if m else None
            out.append(expanded(include, seen + (name,))
                       if include in texts and include not in seen else line)
        return "\n".join(out)

    return {name: expanded(name) for name in texts}


def _last(pattern: "re.Pattern", text: str) -> Optional[str]:
    found = pattern.findall(text)
    return found[-1] if found else None


def env_name_of(text: str) -> Optional[str]:
    """The ``create_environment.env_name`` a gin text binds last, if any."""
    return _last(_ENV_NAME, text)


def algorithm_of(text: str) -> Optional[str]:
    """The class name of the ``TrainerConfig.algorithm_ctor`` a gin text binds last, if any."""
    ctor = _last(_ALGORITHM, text)
    return ctor.rsplit(".", 1)[-1] if ctor else None


def examples_using(algorithm: str) -> List[Tuple[str, Optional[str]]]:
    """(name, env id) of the bundled examples whose ``algorithm_ctor`` is ``@algorithm``."""
    return [(name, env_name_of(text)) for name, text in example_texts().items()
            if algorithm_of(text) == algorithm]


def _family(env_name: Optional[str]) -> Optional[str]:
    """Envs one example serves for another: every Atari game is preprocessed alike."""
    if env_name and (env_name.startswith("ALE/") or "NoFrameskip" in env_name):
        return "atari"
    return env_name


def configured_env_name() -> Optional[str]:
    """``create_environment.env_name`` of the config being built, if it binds one."""
    try:
        return str(gin.query_parameter("create_environment.env_name"))
    except ValueError:
        return None


def suggest_examples(algorithm: str, env_name: Optional[str]) -> str:
    """``--conf=...`` of the bundled example(s) running ``algorithm`` that fit ``env_name``:
    the same env, else the same family (Atari), else all of them with their envs."""
    examples = examples_using(algorithm)
    for same in (lambda e: e == env_name, lambda e: _family(e) == _family(env_name)):
        fitting = [name for name, env in examples if env_name and same(env)]
        if fitting:
            return " or ".join(f"--conf={name}" for name in fitting)
    # the examples nearest to a first run (fewest pip extras) first
    examples.sort(key=lambda e: _family(e[1]) == "atari")
    return " or ".join(f"--conf={name} ({env})" for name, env in examples)
