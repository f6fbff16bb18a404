"""What a sweep varies: gin parameters with a list of values or a range, and the seeds.

A parameter is given on the command line as ``NAME=SPACE``:

- ``PPOLoss.entropy_regularization=[0.0, 0.01]``: a list (a grid axis; a categorical
  choice for random search and TPE). Elements are gin values (numbers, strings, ``None``,
  ``@references``), passed to the run as written.
- ``Adam.lr=loguniform(1e-4, 1e-2)``, ``PPOLoss.gamma=uniform(0.95, 0.999)``,
  ``TrainerConfig.mini_batch_size=int(32, 256)``, ``...=logint(16, 1024)``: a range
  (random search and TPE only).
- ``Agent.reward_weights[1]=uniform(0.0, 1.0)``: element ``i`` of a list the config
  binds (one reward weight), the others as configured (``alf.config.element_binding``).

Each value reaches the run as ``--conf_param NAME=VALUE``. The seed is not a parameter: a
study runs every configuration once per seed (``TrainerConfig.random_seed``).
"""
import ast
import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

import optuna.distributions as od

from alf.errors import ConfigError

RANGE_KINDS = ("uniform", "loguniform", "int", "logint")
# Configurable.param (scope/ allowed), or one element of a list: Configurable.param[i]
_NAME = re.compile(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*(\[\d+\])?$")
_RANGE = re.compile(r"^(?P<kind>\w+)\((?P<args>.*)\)$")
SEED_PARAM = "TrainerConfig.random_seed"


@dataclass(frozen=True)
class Param:
    """One swept gin parameter.

    Attributes:
        name: the gin binding key, e.g. ``PPOLoss.entropy_regularization``.
        choices: the gin texts of a list space (empty for a range).
        kind: ``"list"`` or one of :data:`RANGE_KINDS`.
        low, high: the bounds of a range.
    """
    name: str
    kind: str
    choices: Tuple[str, ...] = ()
    low: float = 0.0
    high: float = 0.0

    @property
    def is_list(self) -> bool:
        return self.kind == "list"

    def distribution(self) -> od.BaseDistribution:
        """Optuna's distribution for this space (a list: categorical over the gin texts)."""
        if self.is_list:
            return od.CategoricalDistribution(list(self.choices))
        if self.kind in ("int", "logint"):
            return od.IntDistribution(int(self.low), int(self.high), log=self.kind == "logint")
        return od.FloatDistribution(self.low, self.high, log=self.kind == "loguniform")

    def gin_text(self, value: Any) -> str:
        """How a sampled ``value`` is written in ``--conf_param NAME=VALUE``."""
        if self.is_list or isinstance(value, str):
            return str(value)
        if self.kind in ("int", "logint"):
            return str(int(value))
        return format(float(value), ".6g")  # 6 significant digits: plenty for a setting

    def spec(self) -> str:
        """The space as the user wrote it (normalised): what a study records."""
        if self.is_list:
            return f"{self.name}=[{', '.join(self.choices)}]"
        low, high = (int(self.low), int(self.high)) if "int" in self.kind else (self.low, self.high)
        return f"{self.name}={self.kind}({low!r}, {high!r})"


def parse_param(text: str) -> Param:
    """``NAME=SPACE`` -> :class:`Param`.

    Raises:
        ConfigError: one line naming the malformed part and the accepted forms.
    """
    forms = ("forms: NAME=[v1, v2, ...], NAME=uniform(lo, hi), NAME=loguniform(lo, hi), "
             "NAME=int(lo, hi), NAME=logint(lo, hi)")
    name, sep, space = (part.strip() for part in text.partition("="))
    if not sep or not _NAME.match(name.split("/")[-1]):
        raise ConfigError(f"--param {text!r}: expected Configurable.parameter=SPACE; {forms}")
    if name == SEED_PARAM:
        raise ConfigError(f"--param {text!r}: seeds are given with --seeds (every "
                          "configuration runs once per seed), not as a parameter")
    if space.startswith("[") and space.endswith("]"):
        choices = tuple(_split_list(space[1:-1]))
        if not choices:
            raise ConfigError(f"--param {text!r}: the list is empty")
        if len(set(choices)) != len(choices):
            raise ConfigError(f"--param {text!r}: the list repeats a value")
        return Param(name, "list", choices=choices)
    match = _RANGE.match(space)
    if match is None or match.group("kind") not in RANGE_KINDS:
        raise ConfigError(f"--param {text!r}: cannot read the space {space!r}; {forms}")
    kind = match.group("kind")
    try:
        low, high = (float(ast.literal_eval(a.strip())) for a in match.group("args").split(","))
    except (ValueError, SyntaxError, TypeError):
        raise ConfigError(f"--param {text!r}: {kind}() takes two numbers, e.g. "
                          f"{kind}(1, 10)") from None
    if not low < high or ("log" in kind and low <= 0) or not math.isfinite(high):
        raise ConfigError(f"--param {text!r}: need low < high" +
                          (" and low > 0 for a log range" if "log" in kind else ""))
    if "int" in kind and (low != int(low) or high != int(high)):
        raise ConfigError(f"--param {text!r}: {kind}() bounds must be whole numbers")
    return Param(name, kind, low=low, high=high)


def _split_list(body: str) -> List[str]:
    """The elements of a list's inside, split at top-level commas (brackets and quotes
    may nest), each stripped."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(body):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    items.append(body[start:].strip())
    return [item for item in items if item]


@dataclass(frozen=True)
class SearchSpace:
    """The parameters of a study (in the order given) and its seeds."""
    params: Tuple[Param, ...]
    seeds: Tuple[int, ...]

    @classmethod
    def parse(cls, param_texts: Sequence[str], seeds: Sequence[int]) -> "SearchSpace":
        params = tuple(parse_param(t) for t in param_texts)
        names = [p.name for p in params]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise ConfigError(f"--param {duplicate} is given twice")
        if not seeds:
            raise ConfigError("--seeds needs at least one seed")
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"--seeds {' '.join(map(str, seeds))} repeats a seed")
        return cls(params, tuple(int(s) for s in seeds))

    @property
    def is_grid(self) -> bool:
        """Every parameter is a list (a grid search is possible)."""
        return all(p.is_list for p in self.params)

    def grid(self) -> List[Dict[str, str]]:
        """Every combination of the list values, first parameter slowest."""
        points: List[Dict[str, str]] = [{}]
        for p in self.params:
            points = [dict(point, **{p.name: c}) for point in points for c in p.choices]
        return points

    def distributions(self) -> Dict[str, od.BaseDistribution]:
        return {p.name: p.distribution() for p in self.params}

    def conf_params(self, values: Dict[str, Any], seed: int) -> List[str]:
        """``--conf_param`` bindings of one run: each parameter's value and the seed."""
        by_name = {p.name: p for p in self.params}
        return [f"{n}={by_name[n].gin_text(v)}" for n, v in values.items()] + \
            [f"{SEED_PARAM}={seed}"]

    def config_name(self, values: Dict[str, Any]) -> str:
        """A readable, file-system safe name of a configuration, e.g.
        ``lr=0.001,entropy_regularization=0.01`` (a hash when too long); runs live in
        ``runs/<config name>/seed_<s>``."""
        by_name = {p.name: p for p in self.params}
        short = _short_names(list(values))
        parts = [f"{short[n]}={by_name[n].gin_text(v)}" for n, v in values.items()]
        name = re.sub(r"[^\w.=,+-]", "_", ",".join(parts)) or "default"
        if len(name) > 100:
            digest = hashlib.sha1(",".join(parts).encode()).hexdigest()[:10]
            name = f"config-{digest}"
        return name


def _short_names(names: List[str]) -> Dict[str, str]:
    """``Adam.lr`` -> ``lr``, ``lr/LinearSchedule.start`` -> ``lr.start`` (the gin scope
    kept), unless two parameters share the short name (then the whole name)."""
    def short(name: str) -> str:
        scope, _, rest = name.rpartition("/")
        last = rest.rsplit(".", 1)[-1]
        return f"{scope.replace('/', '.')}.{last}" if scope else last
    shorts = [short(n) for n in names]
    return {n: (s if shorts.count(s) == 1 else n) for n, s in zip(names, shorts)}


def run_key(config_name: str, seed: int) -> str:
    """The identity of one run of a study (a configuration and a seed)."""
    return f"{config_name}/seed_{seed}"

