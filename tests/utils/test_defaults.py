"""alf.utils.defaults.with_defaults: a subclass constructor that only changes defaults."""
import inspect

import gin
import pytest

from alf.algorithms.impala_algorithm import ImpalaAlgorithm, ImpalaLoss
from alf.algorithms.td3_algorithm import Td3Algorithm
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.defaults import with_defaults


class Base:
    def __init__(self, a: int, b: int = 1, c: str = "base"):
        self.values = (a, b, c)


class Child(Base):
    __init__ = with_defaults(Base.__init__, b=2, c="child")


def test_new_defaults_explicit_arguments_and_signature():
    assert Child(0).values == (0, 2, "child")
    assert Child(0, 5, c="x").values == (0, 5, "x")
    params = inspect.signature(Child).parameters
    assert [p for p in params] == ["a", "b", "c"]
    assert params["b"].default == 2 and params["b"].annotation is int
    assert Base(0).values == (0, 1, "base")  # the parent is unchanged


def test_an_unknown_name_is_refused():
    with pytest.raises(TypeError, match="has no parameter.*d"):
        with_defaults(Base.__init__, d=1)


def test_td3_and_impala_defaults_and_gin_bindings(clean_gin):
    assert inspect.signature(Td3Algorithm).parameters["num_critics"].default == 2
    assert inspect.signature(ImpalaAlgorithm).parameters["loss_ctor"].default is ImpalaLoss
    # a binding of the parent's name does not reach the subclass; the subclass's does
    gin.parse_config("DdpgAlgorithm.actor_update_period = 7\n"
                     "Td3Algorithm.exploration_noise = 0.3")
    alg = Td3Algorithm(TensorSpec((3,)), BoundedTensorSpec((1,), minimum=-1.0, maximum=1.0))
    assert alg._actor_update_period == 2 and alg._exploration_noise == 0.3
    assert alg.name == "Td3Algorithm"
