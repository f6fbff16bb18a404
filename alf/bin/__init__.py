"""alf's commands (``python -m alf.bin.<command>``); see :mod:`alf.bin.cli`.

Importing this package makes a package of a missing extra (``ModuleNotFoundError`` while a
command's module loads) one error line naming the ``pip install`` to run, exit status 2
(:mod:`alf.bin.extras`).
"""
from alf.bin.extras import install_hook as _install_hook

_install_hook()
