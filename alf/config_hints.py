"""The fix that a gin error message names, where gin's own words do not say it.

- :func:`example_module_of`: a name that is unknown because the example module that
  defines it (``alf/examples/*.py``: ``ReinforceAlgorithm``, ``DynaDqnAlgorithm``) is
  not imported: ``--list_configurables`` lists it (it imports every example), a config
  resolves it only after an ``import alf.examples.<module>`` line.
- :func:`plain_callable_hint`: a name that is unknown because it is a plain function or
  class of an imported module (``gym_wrappers = [@my_wrapper]`` with ``def my_wrapper``
  in the user's module): gin references only configurables; the fix is
  ``@alf.configurable`` on it.
- :func:`called_reference_hint`: ``@Name()`` where the caller builds the object itself
  (``Agent.reward_modules = [@RNDRewardModule()]``): gin calls ``Name`` with no arguments
  when the binding is read, and the error is a missing ``observation_spec``.

The examples are read as text (no import), so this works while a config is parsed.
"""
import difflib
import inspect
import os
import re
import sys
import sysconfig
from typing import Any, Dict, Iterator, Optional, Tuple

import gin

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")
_CONFIGURABLE = re.compile(r"^@alf\.configurable(?:\([^)]*\))?\s*\n(?:class|def)\s+(\w+)",
                           re.MULTILINE)


def example_configurables(directory: str = EXAMPLES_DIR) -> Dict[str, str]:
    """Name -> module (``alf.examples.<module>``) of each ``@alf.configurable`` class or
    function defined in ``directory/*.py``."""
    found = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py") and not name.startswith("_"):
            with open(os.path.join(directory, name)) as f:
                for cls in _CONFIGURABLE.findall(f.read()):
                    found[cls] = f"alf.examples.{name[:-3]}"
    return found


def example_module_of(name: str) -> Optional[Tuple[str, str]]:
    """``(configurable, module)`` for an unknown reference ``name`` that an example module
    defines (exactly, or as the closest name: ``DynaDqn`` -> ``DynaDqnAlgorithm``)."""
    known = example_configurables()
    short = name.split(".")[-1]
    if short in known:
        return short, known[short]
    close = [k for k in known if k.startswith(short)] or difflib.get_close_matches(
        short, list(known), n=1, cutoff=0.75)
    return (close[0], known[close[0]]) if close else None


def plain_callable_hint(name: str) -> str:
    """The sentence to add to "unknown reference 'name'" when ``name`` is a plain function or
    class defined in an imported module (not ``@alf.configurable``), else ''."""
    short = name.split(".")[-1]
    for module_name, module in list(sys.modules.items()):
        if not _is_user_module(module):
            continue
        obj = getattr(module, "__dict__", {}).get(short)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) or \
                getattr(obj, "__module__", None) != module_name:
            continue
        kind = "class" if inspect.isclass(obj) else "function"
        where = os.path.basename(getattr(module, "__file__", "") or module_name)
        return (f" {short} is a plain {kind} in {module_name}, and gin references only "
                f"configurables: decorate it with @alf.configurable (`import alf` at the top "
                f"of {where}, then `@alf.configurable` on the line above `"
                f"{'class' if kind == 'class' else 'def'} {short}`)")
    return ""


_NOT_USER_DIRS = tuple(os.path.realpath(d) + os.sep for d in {
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"], os.path.dirname(os.path.abspath(__file__))})


def _is_user_module(module: Any) -> bool:
    """A module of the user's (a gin-imported ``my_module.py``), not the standard library,
    an installed package or alf itself: only the user can decorate its functions."""
    path = getattr(module, "__file__", None)
    if not path:
        return False
    path = os.path.realpath(path)
    return not path.startswith(_NOT_USER_DIRS) and "-packages" + os.sep not in path


def unknown_reference_hint(name: str) -> str:
    """The sentence to add to "unknown reference 'name'" when an example defines it, or when
    it is a plain function or class of an imported module (:func:`plain_callable_hint`)."""
    found = example_module_of(name)
    if found is None:
        return plain_callable_hint(name)
    cls, module = found
    path = "alf/examples/" + module.rsplit(".", 1)[-1] + ".py"
    same = cls == name.split(".")[-1]
    return (f" {'It' if same else cls} is defined in {path}, which a config must import: "
            f"add the line `import {module}` at the top of your gin file"
            + ("" if same else f" and write @{cls}"))


def _references(value: Any) -> Iterator[Any]:
    if isinstance(value, gin.config.ConfigurableReference):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _references(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _references(v)


def called_reference_hint(configurable: str, message: str) -> str:
    """For "missing ... required positional argument(s) 'observation_spec' ..." raised by
    ``configurable``: the binding that wrote ``@configurable()`` and the fix; ''
    otherwise."""
    if "required positional argument" not in message or "_spec" not in message:
        return ""
    short = configurable.split(".")[-1]
    for (scope, selector), params in gin.config._CONFIG.items():  # pylint: disable=W0212
        for param, value in params.items():
            for ref in _references(value):
                if ref.evaluate and ref.selector.split(".")[-1] == short:
                    binding = f"{scope + '/' if scope else ''}{selector.split('.')[-1]}.{param}"
                    return (f": {binding} writes @{short}(), which gin calls without "
                            f"arguments when it reads the binding; the caller builds it with "
                            f"the env's specs: write @{short} without ()")
    return ""
