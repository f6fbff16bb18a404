"""RESTORED_STATE names every optimizer parameter the checkpoint restores: torch's
``Optimizer.load_state_dict`` restores the param groups whole, so each key a factory of
alf.optimizers puts in them (all but ``lr``, set from its schedule at every step) is
undone by a resume (alf/trainers/resume_overrides.py)."""
import inspect

import gin
import pytest
import torch

from alf.config import binding_key
from alf.errors import ConfigError
from alf.studies.pbt_params import configurable_of
from alf.trainers.resume_overrides import RESTORED_STATE, check_resume_overrides
from alf.utils import optimizers


def _factories():
    return {name: fn for name, fn in vars(optimizers).items()
            if inspect.isfunction(fn) and fn.__module__ == optimizers.__name__
            and inspect.signature(fn).return_annotation is optimizers.OptimizerFactory}


def test_every_optimizer_shipped_is_covered():
    assert set(_factories()) >= {"Adam", "AdamW", "RMSprop", "SGD"}
    assert set(_factories()) <= set(RESTORED_STATE)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "SGD"])
def test_restored_state_is_every_param_group_key_a_factory_sets(name):
    fn = _factories()[name]
    with gin.unlock_config():
        factory = fn()
    opt = factory.create([torch.nn.Parameter(torch.zeros(2))])
    group_keys = set(opt.param_groups[0]) - {"params", "lr"}
    configurable = set(inspect.signature(fn).parameters)
    assert RESTORED_STATE[name] == frozenset(group_keys & configurable)


@pytest.mark.parametrize("binding,name", [
    ("alf.optimizers.Adam.betas[1]=0.99", "Adam.betas"),
    ("rnd/alf.optimizers.Adam.betas [ 0 ] = 0.5", "Adam.betas"),
    ("Adam.weight_decay=0.1", "Adam.weight_decay"),
    ("alf.optimizers.Adam.amsgrad=True", "Adam.amsgrad"),
    ("alf.optimizers.AdamW.weight_decay=0.1", "AdamW.weight_decay"),
    ("RMSprop.alpha=0.9", "RMSprop.alpha"),
    ("SGD.momentum=0.9", "SGD.momentum"),
])
def test_a_restored_value_is_refused(binding, name):
    with pytest.raises(ConfigError) as e:
        check_resume_overrides([binding])
    assert str(e.value).startswith(f"--conf_param '{binding}': a resume cannot change {name}:")


@pytest.mark.parametrize("binding", [
    "alf.optimizers.Adam.lr=1e-4", "Adam.gradient_clipping=0.5",
    "Agent.reward_weights[1]=0.5", "TrainerConfig.num_iterations=4",
    "x/A.b='a/SGD.momentum'",  # the value is not the key
])
def test_a_value_read_again_is_let_through(binding):
    check_resume_overrides([binding])


@pytest.mark.parametrize("binding,key", [
    ("lr/LinearSchedule.start=0.5", ("LinearSchedule", "start")),
    ("a/b/alf.optimizers.Adam.betas[1] = 0.99", ("alf.optimizers.Adam", "betas")),
    ("Agent.reward_weights [2]", ("Agent", "reward_weights")),
    ("A.b='x/y[0]'", ("A", "b")),
])
def test_binding_key_drops_scope_element_and_value(binding, key):
    assert binding_key(binding) == key


def test_pbt_and_the_resume_check_share_the_parsing():
    assert configurable_of("rnd/Adam.betas[1]") == ("alf.optimizers.Adam", "betas")
    assert configurable_of("Agent.reward_weights[1]") == ("Agent", "reward_weights")
