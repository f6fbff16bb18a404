"""Every gin-configurable parameter of alf has a help line (what `--describe` shows), so a
researcher can discover what to set without reading the source."""


def test_every_configurable_parameter_is_documented():
    from alf import config_help
    assert config_help.undocumented() == []
