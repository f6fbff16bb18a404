"""The import layers of docs/design/layers.md hold: ``lint-imports`` (import-linter, the
``[test]`` extra) checks the contracts in ``.importlinter`` and exits 0.

CI also runs ``lint-imports`` on its own before pytest; this test makes README command
(b) (``pip install -e ".[test]" && python -m pytest -q -n auto --dist loadfile tests``) cover the layers too.
"""
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lint_imports() -> str:
    """The ``lint-imports`` of this interpreter's environment (beside ``python``), else the
    one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    found = beside if os.path.isfile(beside) else shutil.which("lint-imports")
    assert found, ("lint-imports not found: install the test extras "
                   "(pip install -e \".[test]\"), which include import-linter")
    return found


def test_import_layers_hold():
    # --no-cache: nothing is written into the repository
    result = subprocess.run([_lint_imports(), "--no-cache"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        "an import breaks the layers of docs/design/layers.md (contracts in .importlinter):\n"
        + result.stdout + result.stderr)
