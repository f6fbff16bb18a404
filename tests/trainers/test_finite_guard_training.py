"""The non-finite guard inside real training loops: what a run reports when its state is
already non-finite (as after a bad step with the guard off, or a buffer gone bad)."""
import math
import time

import pytest
import torch

from alf.errors import NonFiniteError
from alf.utils.finite_guard import PARAM_LIMIT
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


def _slow_check(guard, seconds=0.4):
    """Make the guard's after-step check slow, so that the window between an optimizer
    step and its check is wide open: whatever the acting thread does meanwhile shows."""
    check = guard.after_step

    def slow(algorithm, loss_info, entries):
        time.sleep(seconds)
        check(algorithm, loss_info, entries)

    guard.after_step = slow


def _peak(tensors):
    return max(float(t.detach().abs().max()) for t in tensors if t.is_floating_point())


TINY_APPO_THREAD = TINY_PPO.replace("include 'ppo_cart_pole.gin'", """
include 'appo_cart_pole.gin'
TrainerConfig.async_unroll = True
TrainerConfig.unroll_parameter_update_period = 1
""") + "TrainerConfig.learner_thread = True\n"


def test_learner_thread_async_never_publishes_the_diverged_step(tmp_path):
    """APPO, async unroll, learner thread, lr 1e30: the first step diverges. The main
    thread publishes weights to the env workers after every unroll it collects; it must
    never publish the diverged ones, however long the check of that step takes."""
    trainer = build_trainer(tmp_path / "appo", TINY_APPO_THREAD,
                            ["lr/LinearSchedule.start=1e30",
                             "TrainerConfig.num_iterations=6"])
    _slow_check(trainer.context.finite_guard)
    unroller = trainer.unroller
    published = []  # (version, largest |x| of the weights the env workers get)
    publish = unroller._publish

    def spy():
        published.append((unroller._version, _peak(
            trainer.algorithm.rollout_state_dict().values())))
        publish()

    unroller._publish = spy
    with pytest.raises(NonFiniteError, match=r"^training went non-finite at iteration 1 "
                       r"\(update 1\): the parameter _actor_network\."):
        trainer.run()
    assert published and published[0][0] == 0, published  # the initial weights went out
    assert all(peak <= PARAM_LIMIT for _, peak in published), published


def test_learner_thread_sync_never_acts_on_the_diverged_step(tmp_path):
    """PPO, sync unroll (the main thread acts), learner thread, lr 1e30: no policy step
    is computed from the diverged weights."""
    trainer = build_trainer(tmp_path / "ppo", TINY_PPO,
                            ["lr/LinearSchedule.start=1e30", "TrainerConfig.num_iterations=6",
                             "TrainerConfig.learner_thread=True"])
    _slow_check(trainer.context.finite_guard)
    algorithm = trainer.algorithm
    acted_on = []  # largest |x| of the actor's weights at each policy step
    rollout_step = algorithm.rollout_step

    def spy(time_step, state):
        acted_on.append(_peak(algorithm._actor_network.parameters()))
        return rollout_step(time_step, state)

    algorithm.rollout_step = spy
    unroller = trainer.unroller
    collect, collections = unroller.collect, []

    def count(*args, **kwargs):
        collections.append(len(acted_on))
        return collect(*args, **kwargs)

    unroller.collect = count
    with pytest.raises(NonFiniteError, match=r"^training went non-finite at iteration 1 "
                       r"\(update 1\): the parameter _actor_network\."):
        trainer.run()
    assert collections[:2] == [0, 8], collections  # the next unroll began meanwhile
    assert all(peak <= PARAM_LIMIT for peak in acted_on), acted_on
