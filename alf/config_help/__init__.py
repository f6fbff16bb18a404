"""Discover what can be run and set without reading source: examples and configurables.

Backs ``--list_examples``, ``--list_configurables`` and ``--describe NAME`` of
``alf.bin.train`` / ``alf.bin.play`` (called from :func:`alf.bin.cli.discover`):

- every bundled ``alf/examples/*.gin`` with its one-line description (the first
  comment line of the file) and the pip extra its env needs; files that set no
  algorithm are listed apart as the shared settings that examples ``include``;
- every gin configurable, grouped by module, with the first line of its doc;
- one configurable's parameters, each with its default (written the way gin
  wants it, e.g. ``@PPOLoss``) and its help, taken from the Google-style
  ``Args:`` (or ``Attributes:``) section of the class / ``__init__`` /
  function docstring. A parameter documented only in a base class (``see
  :class:`RLAlgorithm```, or not mentioned at all) takes that class's text.

Everything is read from the live gin registry after ``import alf``, so a new
``@alf.configurable`` is described with no extra registration.

Modules, one job each:

- :mod:`~alf.config_help.examples`: the bundled ``.gin`` files (``--list_examples``);
- :mod:`~alf.config_help.registry`: enumerating and finding gin configurables;
- :mod:`~alf.config_help.listing`: the ``--list_configurables`` text;
- :mod:`~alf.config_help.docstrings`: parameter help from ``Args:`` sections,
  following "see X" references and base classes;
- :mod:`~alf.config_help.params`: a configurable's parameters, defaults as gin text;
- :mod:`~alf.config_help.description`: the ``--describe`` text;
- :mod:`~alf.config_help.markup`: reST docstring text made terminal-friendly.

The names below are re-exported so ``from alf.config_help import describe``
and ``alf.config_help.describe`` work without knowing the module. No module is
named like a re-exported function (hence ``description``, ``params``): the
function would hide the module as an attribute of the package.
"""
from alf.config import EXAMPLES_DIR
from alf.config_help.description import describe, format_description, format_parameter
from alf.config_help.docstrings import param_doc, parse_param_docs
from alf.config_help.examples import (NO_DESCRIPTION, Example, env_extra, format_examples,
                                      list_examples)
from alf.config_help.listing import format_configurable_list
from alf.config_help.markup import plain
from alf.config_help.params import Parameter, format_default, parameters, undocumented
from alf.config_help.registry import Configurable, configurables, find, register_all

__all__ = [
    "EXAMPLES_DIR",
    "NO_DESCRIPTION",
    "Configurable",
    "Example",
    "Parameter",
    "configurables",
    "describe",
    "env_extra",
    "find",
    "format_configurable_list",
    "format_default",
    "format_description",
    "format_examples",
    "format_parameter",
    "list_examples",
    "param_doc",
    "parameters",
    "parse_param_docs",
    "plain",
    "register_all",
    "undocumented",
]
