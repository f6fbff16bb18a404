"""The gin configurables alf registers: enumerating them, naming them as gin files do, finding one.

Everything is read from the live gin registry after :func:`register_all`, so a
new ``@alf.configurable`` is found with no extra registration.
"""
import dataclasses
import importlib
import pkgutil
from typing import Any, List

import gin

from alf import examples


@dataclasses.dataclass
class Configurable:
    """One registered gin configurable."""
    name: str        # what a gin file writes: "PPOAlgorithm", "alf.optimizers.Adam", "torch.tanh"
    selector: str    # the registry key: module + name
    module: str
    target: Any      # the class or function
    external: bool = False  # a gin.external_configurable (``torch.tanh``): only a @reference


def register_all() -> None:
    """Import the example algorithms in alf/examples (``import alf``, done before any alf
    module runs, registered every library configurable)."""
    for info in pkgutil.iter_modules(examples.__path__):
        try:
            importlib.import_module(f"alf.examples.{info.name}")
        except ImportError:  # an example needing an optional extra that is not installed
            continue


def configurables(include_external: bool = False,
                  include_user: bool = False) -> List[Configurable]:
    """Every registered configurable, sorted by selector; gin's own (``gin.macro``) excluded.

    Args:
        include_external: also return ``gin.external_configurable`` entries that
            are not alf's (``torch.tanh``, usable as ``@torch.tanh`` references).
        include_user: also return configurables that modules outside alf declared with
            ``@alf.configurable`` (a user's ``my_alg.py`` imported by their gin file),
            which ``--describe`` and ``--list_configurables`` show like alf's own.
    """
    entries = [(str(s), c) for s, c in gin.config._REGISTRY.items()  # pylint: disable=W0212
               if not str(s).startswith("gin.")]
    shorts = [s.split(".")[-1] for s, _ in entries]
    out = []
    for (selector, c), short in zip(entries, shorts):
        module = c.module or selector.rpartition(".")[0]
        declared = module.startswith("alf") or _is_user(c)
        if not (module.startswith("alf") or include_user and declared or include_external):
            continue
        # gin resolves a bare name when it is unique; alf.optimizers.* are conventionally
        # written with their module (alf.optimizers.Adam), externals always are.
        bare = shorts.count(short) == 1 and declared and module != "alf.optimizers"
        out.append(Configurable(short if bare else selector, selector, module, c.wrapped,
                                external=not declared))
    return sorted(out, key=lambda c: c.selector)


def _is_user(c: Any) -> bool:
    """Declared outside alf with ``@alf.configurable``/``@gin.configurable``: gin records the
    declaring module, where ``gin.external_configurable`` entries (``torch.tanh``) have none."""
    return c.module is not None and not c.module.startswith(("alf", "gin"))


def package_of(module: str) -> str:
    """``alf.networks.q_networks`` -> ``alf.networks``: the group a configurable is listed in."""
    return ".".join(module.split(".")[:2])


def find(query: str) -> List[Configurable]:
    """Configurables matching ``query``: an exact name/selector (also ignoring case), else
    every one whose module-qualified name contains it (``PPO``, ``networks``). Those of
    the user's own imported modules count too."""
    entries = configurables(include_user=True)
    for same in (lambda a, b: a == b, lambda a, b: a.lower() == b.lower()):
        exact = [c for c in entries
                 if same(c.name, query) or same(c.selector, query)
                 or same(c.selector.split(".")[-1], query)
                 or c.selector.lower().endswith("." + query.lower()) and "." in query]
        if exact:
            return exact
    return [c for c in entries if query.lower() in c.selector.lower()]
