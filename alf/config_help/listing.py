"""The text ``--list_configurables`` prints: every configurable, grouped by package."""
from alf.config_help.markup import summary
from alf.config_help.registry import configurables, package_of


def format_configurable_list() -> str:
    """The text ``--list_configurables`` prints: configurables grouped by module.

    alf's configurables (and those of the user's modules that a parsed ``--conf``
    imported) are listed one a line with the first line of their doc, under their
    package (``alf.networks``, ``my_alg``); other registered callables
    (``torch.tanh``) are named at the end, as they are only used as ``@references``.
    """
    entries = configurables(include_external=True)
    width = max(len(c.name) for c in entries if not c.external) + 2
    lines = ["gin configurables (bind as Name.parameter = value; "
             "--describe Name shows the parameters):"]
    module = None
    externals = []
    for c in sorted(entries, key=lambda c: (package_of(c.module), c.selector)):
        if c.external:
            externals.append(c.name)
            continue
        if package_of(c.module) != module:
            module = package_of(c.module)
            lines += ["", f"{module}:"]
        lines.append(f"  {c.name:<{width}}{summary(c.target)}")
    if externals:
        lines += ["", "Also usable as @references (e.g. activation functions): "
                  + ", ".join(f"@{n}" for n in externals)]
    return "\n".join(lines)
