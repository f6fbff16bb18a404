"""Ctrl-C inside Trainer.run (in-process): stop at an iteration boundary, save, close envs."""
import os
import signal

import pytest
import torch

from alf.trainers.trainer import _DeferredInterrupt


def test_first_sigint_is_deferred_second_raises():
    before = signal.getsignal(signal.SIGINT)
    with _DeferredInterrupt() as interrupt:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between bytecodes of the main thread
            if interrupt.requested:
                break
        assert interrupt.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
    assert signal.getsignal(signal.SIGINT) is before


def test_sigint_during_iteration_finishes_it_then_saves(make_trainer, alf_cli, tmp_path,
                                                         monkeypatch):
    root = tmp_path / "run"
    handler_before = signal.getsignal(signal.SIGINT)
    trainer = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=100"])
    alg = trainer.algorithm
    original = alg.train_iter

    def train_iter():
        if trainer.context.iteration == 3:  # Ctrl-C arrives in the middle of iteration 3
            os.kill(os.getpid(), signal.SIGINT)
        return original()

    monkeypatch.setattr(alg, "train_iter", train_iter)
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    assert trainer.context.iteration == 3
    state = torch.load(root / "train" / "ckpt-0000000003.pt", weights_only=True)
    assert state["context"]["iteration"] == 3 and state["context"]["env_steps"] == 3 * 16
    assert trainer.algorithm.env.closed
    assert signal.getsignal(signal.SIGINT) is handler_before
