"""Trainer callbacks (``TrainerConfig.callbacks``, alf/trainers/callbacks.py): the
documented way to change reward weights from code during a run; the snippet of
docs/writing_an_algorithm.md ("Changing reward weights from code") runs as printed."""
import os
import re

import pytest
import torch

from alf.errors import ConfigError
from alf.trainers.checkpointer import Checkpointer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO_ROOT, "docs", "writing_an_algorithm.md")

COUNT = """
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @PPOAlgorithm
Agent.reward_modules = [@CountRewardModule]
Agent.reward_weights = [1.0, 0.5]
CountRewardModule.code_bits = 8
TrainerConfig.checkpoint_interval = 1
"""


def _doc_block(marker: str) -> str:
    text = open(DOC).read()
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, marker
    return found[0]


@pytest.fixture(scope="module")
def bonus_off():
    """The doc's callback, executed as printed (registers BonusOffAtReturn in gin)."""
    namespace = {}
    exec(compile(_doc_block("class BonusOffAtReturn"), DOC, "exec"), namespace)
    return namespace["BonusOffAtReturn"]


def test_the_doc_callback_turns_the_bonus_off_and_the_checkpoint_keeps_it(
        bonus_off, make_trainer, alf_cli, tmp_path):
    """Threshold 0: off once the first episodes end (CartPole's return is positive);
    the Reward/<column>/weight summary shows the change, and the checkpoint holds it
    as fixed weights (which a plain resume keeps: test_resume_reward_weights.py)."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO + COUNT + """
TrainerConfig.num_iterations = 6
TrainerConfig.callbacks = [@BonusOffAtReturn()]
BonusOffAtReturn.threshold = 0
""")
    weights = []
    add = trainer.context.add_iteration_scalar

    def spy(tag, value, reduce="mean"):
        if tag == "Reward/CountRewardModule/weight":
            weights.append(value)
        add(tag, value, reduce)

    trainer.context.add_iteration_scalar = spy
    assert isinstance(trainer._config.callbacks[0], bonus_off)
    trainer.run()
    assert weights[0] == 0.5 and weights[-1] == 0.0, weights
    off = weights.index(0.0)
    assert set(weights[off:]) == {0.0} and 0 < off < len(weights) - 1
    _, state, _ = Checkpointer(str(tmp_path / "run" / "train")).load_latest()
    assert state["algorithm"]["_reward_weights"].tolist() == [1.0, 0.0]
    assert bool(state["algorithm"]["_reward_weights_fixed"])


class _Recorder:
    def __init__(self):
        self.calls = []

    def on_iteration_end(self, algorithm, context, metrics):
        self.calls.append((context.iteration, context.env_steps, metrics is not None))


def test_callbacks_run_after_every_iteration_in_order(make_trainer, alf_cli, tmp_path):
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO)
    first, second = _Recorder(), _Recorder()
    trainer._config.callbacks = (first, second)
    trainer.run()
    assert first.calls == second.calls == [(i, 16 * i, True) for i in range(1, 5)]


def test_a_callback_that_is_not_one_is_one_line(clean_gin, alf_cli, tmp_path):
    from alf.trainers.trainer_config import TrainerConfig
    with pytest.raises(ConfigError, match=r"TrainerConfig.callbacks: _Recorder has no "
                                          r"on_iteration_end.*write @_Recorder\(\) in gin"):
        TrainerConfig(callbacks=[type("_Recorder", (), {})])
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + "TrainerConfig.callbacks = [@PPOLoss]\n")
    bad = alf_cli.run("alf.bin.train", ["--conf", "tiny.gin", "--root_dir", "run"], tmp_path)
    assert bad.returncode == 2, bad.stderr
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "TrainerConfig.callbacks: PPOLoss has no on_iteration_end" \
        in lines[0], bad.stderr
    assert not (tmp_path / "run").exists()
