"""The one line for a module the user's own code imports and nobody installed
(:func:`alf.bin.extras.user_import_message`), and the cases it must leave to a traceback:
a missing ``alf.*`` module, or an import made by alf itself, is alf's bug, not a package
to install."""
import importlib
import sys

import pytest

from alf.bin.extras import user_import_message


def _error_of(fn) -> ModuleNotFoundError:
    with pytest.raises(ModuleNotFoundError) as info:
        fn()
    return info.value


def _user_module(tmp_path, monkeypatch, body: str):
    (tmp_path / "my_user_env.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_user_env", None)
    return lambda: importlib.import_module("my_user_env")


def test_an_import_statement_in_user_code_is_named_with_its_line(tmp_path, monkeypatch):
    load = _user_module(tmp_path, monkeypatch, "x = 1\nimport zz_not_installed_pkg\n")
    message = user_import_message(_error_of(load))
    assert message.startswith("No module named 'zz_not_installed_pkg' (imported at "), message
    assert f"{tmp_path / 'my_user_env.py'}:2)" in message, message
    assert "install it in this Python" in message


def test_import_module_in_user_code_names_the_call_not_importlib(tmp_path, monkeypatch):
    load = _user_module(tmp_path, monkeypatch,
                        "import importlib\n\nimportlib.import_module('zz_other_missing')\n")
    message = user_import_message(_error_of(load))
    assert f"{tmp_path / 'my_user_env.py'}:3)" in message, message
    assert "importlib" not in message.split("(imported at ")[1].split(")")[0]


def test_a_missing_alf_module_is_left_to_the_traceback():
    error = _error_of(lambda: importlib.import_module("alf.planning.no_such_module"))
    assert user_import_message(error) is None


def test_an_import_made_by_alf_itself_is_left_to_the_traceback():
    """Code compiled as an alf module's (as ``alf.environments.env_ids`` imports a
    custom id's module by name) that fails to import: alf's frame, so no "install it"."""
    from alf.environments import env_ids
    code = compile("import importlib\nimportlib.import_module('zz_missing_from_alf')\n",
                   env_ids.__file__, "exec")
    error = _error_of(lambda: exec(code, {}))
    assert user_import_message(error) is None
