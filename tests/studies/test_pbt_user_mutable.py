"""A researcher's own parameter can be declared mutable for PBT with
``@alf.configurable(mutable=...)`` in their module next to the conf (it used to be refused
as "PBT cannot change it in the middle of a run" whatever it was); an undeclared one is
still refused, and a declared name that is not a parameter is an error naming it."""
import uuid

import pytest

import alf
from alf import config as alf_config
from alf.errors import ConfigError
from alf.studies.pbt_params import check_mutable

USER_MODULE = '''
import alf
from alf.algorithms.dqn_algorithm import DqnAlgorithm


@alf.configurable(mutable=("beta",))
class {loss}:
    def __init__(self, beta: float = 1.0, width: int = 8):
        self.beta = beta


@alf.configurable(mutable="v_max")
class {alg}(DqnAlgorithm):
    def __init__(self, *args, v_max: float = 100.0, v_min: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.v_max = v_max
'''


def _user_conf(tmp_path, module_text: str) -> str:
    """A module with a unique name next to a conf that imports it; returns the conf."""
    mod = "pbt_user_" + uuid.uuid4().hex[:8]
    (tmp_path / f"{mod}.py").write_text(module_text)
    conf = tmp_path / "exp.gin"
    conf.write_text(f"import {mod}\ninclude 'dqn_cart_pole.gin'\n")
    return str(conf)


def test_declared_user_parameters_are_mutable(clean_gin, tmp_path):
    tag = uuid.uuid4().hex[:6]
    loss, alg = f"MyLoss{tag}", f"ClippedDqn{tag}"
    alf_config.parse_config(_user_conf(tmp_path, USER_MODULE.format(loss=loss, alg=alg)))
    for name in (f"{loss}.beta", f"{alg}.v_max", f"scope/{alg}.v_max",
                 f"{alg}.gamma"):  # gamma: forwarded to DqnAlgorithm, which lists it
        check_mutable(name)
    for name in (f"{loss}.width", f"{alg}.v_min", f"{alg}.q_network_ctor"):
        with pytest.raises(ConfigError) as e:
            check_mutable(name)
        assert "\n" not in str(e.value) and name in str(e.value)
        assert "PBT cannot change it in the middle of a run" in str(e.value)
        assert "@alf.configurable(mutable=" in str(e.value)


def test_a_declared_name_that_is_not_a_parameter_is_an_error(clean_gin, tmp_path):
    with pytest.raises(ConfigError, match=r"MyLossTypo: 'betaa' is not a parameter of "
                                          r"MyLossTypo. Did you mean: beta\?"):
        @alf.configurable(mutable=("betaa",))
        class MyLossTypo:  # pylint: disable=unused-variable
            def __init__(self, beta: float = 1.0):
                self.beta = beta
    # in the user's module: one line naming the conf line that imports it
    tag = uuid.uuid4().hex[:6]
    bad = USER_MODULE.format(loss=f"L{tag}", alg=f"A{tag}").replace('mutable="v_max"',
                                                                       'mutable="v_maxx"')
    with pytest.raises(ConfigError) as e:
        alf_config.parse_config(_user_conf(tmp_path, bad))
    msg = str(e.value)
    assert "\n" not in msg and "exp.gin, line 1" in msg
    assert "'v_maxx' is not a parameter" in msg and "Did you mean: v_max?" in msg
