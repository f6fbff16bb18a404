"""Every package alf imports is declared by setup.py for the commands that import it.

``alf.bin.compare`` once died in a fresh ``pip install -e ".[sweep]"`` with a
``ModuleNotFoundError`` traceback: ``alf/studies/stats.py`` imported scipy, which no extra
declared, and ``[test]`` (which brings it) hid that from the suite. Installing each extra
alone in a fresh venv takes minutes, so this test reads the source instead
(:mod:`tests.import_scan`, no import needed) and checks, for each command of setup.py's
``console_scripts``:

- a module-level import of a module the command may load is declared by
  ``install_requires`` or by an extra the command needs (``alf.bin.extras.REQUIRED``);
- a deferred (function-local) or ``try/except ImportError``-guarded one by those or by an
  extra of the command's optional features (``alf.bin.extras.OPTIONAL``) that
  ``alf.bin.extras.PACKAGE_EXTRAS`` names for the package;

and that every optional package alf imports has the extras that install it listed in
``alf.bin.extras.PACKAGE_EXTRAS`` (the hint a missing one prints), each declaring it.
"""
import re
import runpy
import sys
from importlib import metadata
from typing import Dict, List, Set

import pytest
import setuptools
from packaging.requirements import Requirement

from alf.bin import extras as alf_extras
from tests.import_scan import REPO, Import, Scan

pytestmark = pytest.mark.skipif(sys.version_info < (3, 10),
                                reason="needs sys.stdlib_module_names (Python 3.10+)")


@pytest.fixture(scope="module")
def setup_kwargs() -> dict:
    """The keyword arguments setup.py gives ``setuptools.setup``."""
    captured = {}
    saved = setuptools.setup
    setuptools.setup = lambda **kwargs: captured.update(kwargs)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(REPO)
            runpy.run_path("setup.py")
    finally:
        setuptools.setup = saved
    return captured


@pytest.fixture(scope="module")
def scan() -> Scan:
    return Scan()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(requirements: List[str]) -> Set[str]:
    """Distributions the requirements install by name, with those their extras add
    (``minari[hdf5]`` brings h5py; read from the installed package's metadata)."""
    out = set()
    for text in requirements:
        req = Requirement(text)
        out.add(_norm(req.name))
        try:
            deps = (metadata.requires(req.name) or []) if req.extras else []
        except metadata.PackageNotFoundError:
            deps = []
        for dep in map(Requirement, deps):
            if dep.marker and "extra" in str(dep.marker) and any(
                    dep.marker.evaluate({"extra": e}) for e in req.extras):
                out.add(_norm(dep.name))
    return out


_PROVIDERS = metadata.packages_distributions()


def _provides(top: str, declared: Set[str]) -> bool:
    """Whether a distribution in ``declared`` provides the import name ``top``."""
    dists = {_norm(d) for d in _PROVIDERS.get(top, [])} or {_norm(top)}
    return bool(dists & declared)


def _extras(kwargs: dict) -> Dict[str, Set[str]]:
    return {name: _declared(reqs) for name, reqs in kwargs["extras_require"].items()}


def _commands(kwargs: dict) -> Set[str]:
    scripts = kwargs["entry_points"]["console_scripts"]
    return {s.split("=", 1)[1].split(":")[0].strip() for s in scripts}


def test_every_command_has_its_extras_listed(setup_kwargs):
    commands = _commands(setup_kwargs)
    assert set(alf_extras.REQUIRED) == commands, "list each console_scripts command in " \
        "alf/bin/extras.py REQUIRED (the extras it cannot run without)"
    assert set(alf_extras.OPTIONAL) == commands
    named = {e for table in (alf_extras.REQUIRED, alf_extras.OPTIONAL, alf_extras.PACKAGE_EXTRAS)
             for extras in table.values() for e in extras}
    assert named <= set(setup_kwargs["extras_require"]), named - set(setup_kwargs["extras_require"])


def test_each_extra_in_the_install_hints_installs_its_package(setup_kwargs):
    extras = _extras(setup_kwargs)
    wrong = [f"[{e}] does not declare {package}" for package, names in
             alf_extras.PACKAGE_EXTRAS.items() for e in names if not _provides(package, extras[e])]
    assert not wrong, "alf/bin/extras.py PACKAGE_EXTRAS vs setup.py: " + "; ".join(wrong)


def _problem(imp: Import, command: str, needs: List[str]) -> str:
    kind = "deferred or guarded import" if imp.deferred or imp.guarded else "import"
    where = " nor ".join(["install_requires"] + [f"[{e}]" for e in needs])
    return (f"{imp.where}: {kind} of {imp.top}, which {command} may load, but neither "
            f"{where} declares it: add it to setup.py (and alf/bin/extras.py)")


def test_every_command_imports_only_what_its_extras_declare(setup_kwargs, scan):
    core = _declared(setup_kwargs["install_requires"])
    extras = _extras(setup_kwargs)
    problems = set()
    for command in sorted(_commands(setup_kwargs)):
        required = list(alf_extras.REQUIRED.get(command, ()))
        for imp in scan.third_party(scan.closure(command)):
            # an optional feature's extra counts for the packages it is the hint for
            optional = [e for e in alf_extras.OPTIONAL.get(command, ())
                        if e in alf_extras.PACKAGE_EXTRAS.get(imp.top, ())]
            needs = required + optional if imp.deferred or imp.guarded else required
            declared = core.union(*(extras.get(e, set()) for e in needs))
            if not _provides(imp.top, declared):
                problems.add(_problem(imp, command, needs))
    assert not problems, "\n".join(sorted(problems))


def test_every_optional_package_has_an_install_hint(setup_kwargs, scan):
    core = _declared(setup_kwargs["install_requires"])
    missing = sorted({f"{imp.top} ({imp.where})" for imp in scan.third_party(set(scan.files))
                      if not _provides(imp.top, core)
                      and imp.top not in alf_extras.PACKAGE_EXTRAS})
    assert not missing, ("alf imports packages that install_requires does not declare and "
                         "alf/bin/extras.py PACKAGE_EXTRAS does not map to an extra: "
                         + ", ".join(missing))
