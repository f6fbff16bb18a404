"""The non-finite guard inside real training loops: what a run reports when its state is
already non-finite (as after a bad step with the guard off, or a buffer gone bad)."""
import math

import pytest
import torch

from alf.errors import NonFiniteError
from conftest import TINY_PPO, TINY_SAC, build_trainer


def _poison(module):
    with torch.no_grad():
        module.fill_(math.nan)


def test_ppo_names_the_loss_term_and_takes_no_step(tmp_path):
    trainer = build_trainer(tmp_path / "ppo", TINY_PPO, ["TrainerConfig.num_iterations=2"])
    _poison(trainer.algorithm._actor_network._projection._layer.bias)
    value_before = trainer.algorithm._value_network.state_dict()
    with pytest.raises(NonFiniteError, match=r"^training went non-finite at iteration 1 "
                       r"\(update 1\): the loss term Loss/PPOAlgorithm/pg_loss \(nan\); the "
                       r"optimizer step was not taken"):
        trainer.run()
    for k, v in trainer.algorithm._value_network.state_dict().items():
        assert torch.equal(v, value_before[k]), k
    assert not (tmp_path / "ppo" / "train").exists()


def test_sac_acting_error_from_torch_is_explained_by_the_parameter(tmp_path):
    """torch.distributions raises while acting ("normal expects all elements of std >=
    0.0"); the run reports the non-finite parameter instead, torch's words in brackets."""
    trainer = build_trainer(tmp_path / "sac", TINY_SAC, ["TrainerConfig.initial_collect_steps=0"])
    _poison(next(trainer.algorithm._actor.parameters()))
    with pytest.raises(NonFiniteError) as e:
        trainer.run()
    message = str(e.value)
    assert message.startswith("training went non-finite at iteration 1: the parameter _actor.")
    assert "(nan) (RuntimeError: normal expects all elements of std >= 0.0)" in message, message
    assert isinstance(e.value.__cause__, RuntimeError)
