"""Ctrl-C inside Trainer.run (in-process): stop at an iteration boundary, save, close envs."""
import os
import signal

import pytest
import torch

from alf.trainers.interrupt_guard import IterationAbandoned, InterruptGuard, TrainingInterrupted


def _spin():
    for _ in range(1000):  # the handler runs between bytecodes of the main thread
        pass


def test_first_two_sigints_are_deferred_third_abandons():
    """A user who presses twice still gets a consistent checkpoint; the third press stops
    mid-iteration (and saves nothing for it)."""
    before = signal.getsignal(signal.SIGINT)
    with InterruptGuard() as interrupt:
        os.kill(os.getpid(), signal.SIGINT)
        _spin()
        assert interrupt.requested
        os.kill(os.getpid(), signal.SIGINT)
        _spin()
        assert interrupt.presses == 2
        with pytest.raises(IterationAbandoned):
            os.kill(os.getpid(), signal.SIGINT)
            _spin()
    assert signal.getsignal(signal.SIGINT) is before


def test_sigint_during_iteration_finishes_it_then_saves(make_trainer, alf_cli, tmp_path,
                                                         monkeypatch):
    root = tmp_path / "run"
    handler_before = signal.getsignal(signal.SIGINT)
    trainer = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=100"])
    alg = trainer.learner
    original = alg.train_iter

    def train_iter():
        if trainer.context.iteration == 3:  # Ctrl-C arrives in the middle of iteration 3
            os.kill(os.getpid(), signal.SIGINT)
        return original()

    monkeypatch.setattr(alg, "train_iter", train_iter)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.run()
    assert trainer.context.iteration == 3
    assert info.value.checkpoint == str(root / "train" / "ckpt-0000000003.pt")
    state = torch.load(root / "train" / "ckpt-0000000003.pt", weights_only=True)
    assert state["context"]["iteration"] == 3 and state["context"]["env_steps"] == 3 * 16
    assert trainer.env.closed
    assert signal.getsignal(signal.SIGINT) is handler_before


def test_sigint_inside_a_shielded_block_waits_for_it():
    """Ctrl-C during a checkpoint write (or shutdown) is deferred however often it is
    pressed: the block completes, then a stop at the iteration boundary is requested."""
    with InterruptGuard() as guard:
        finished = False
        with guard.shielded():
            for _ in range(3):
                os.kill(os.getpid(), signal.SIGINT)
                _spin()
            finished = True
        assert finished and guard.requested


def test_third_sigint_abandons_the_iteration_and_saves_nothing(make_trainer, alf_cli, tmp_path,
                                                              monkeypatch):
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=100",
                                                    "TrainerConfig.checkpoint_interval=2"])
    alg = trainer.learner
    original = alg.train_iter

    def train_iter():
        if trainer.context.iteration == 3:  # three Ctrl-C in the middle of iteration 3
            for _ in range(3):
                os.kill(os.getpid(), signal.SIGINT)
                _spin()
        return original()

    monkeypatch.setattr(alg, "train_iter", train_iter)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.run()
    assert info.value.abandoned and info.value.checkpoint is None
    assert info.value.newest == str(root / "train" / "ckpt-0000000002.pt")
    assert sorted(p.name for p in (root / "train").iterdir()) == ["ckpt-0000000002.pt"]
    assert trainer.env.closed


def test_second_sigint_during_final_save_cannot_cut_it_short(make_trainer, alf_cli, tmp_path,
                                                             monkeypatch):
    """The reported failure: two Ctrl-C 0.1 s apart left a 0-byte ckpt-*.pt.tmp and no
    checkpoint. Here the second Ctrl-C lands while the final checkpoint is being written."""
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=100"])
    alg = trainer.learner
    original_iter, original_save = alg.train_iter, trainer._checkpoints.checkpointer.save

    def train_iter():
        if trainer.context.iteration == 2:
            os.kill(os.getpid(), signal.SIGINT)  # first Ctrl-C: stop after this iteration
        return original_iter()

    def slow_save(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # second Ctrl-C while saving
        _spin()
        return original_save(*args, **kwargs)

    monkeypatch.setattr(alg, "train_iter", train_iter)
    monkeypatch.setattr(trainer._checkpoints.checkpointer, "save", slow_save)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.run()
    path = root / "train" / "ckpt-0000000002.pt"
    assert info.value.checkpoint == str(path)
    assert torch.load(path, weights_only=True)["context"]["iteration"] == 2
    assert not list((root / "train").glob("*.tmp"))
    assert trainer.env.closed


def test_crash_saves_no_checkpoint(make_trainer, alf_cli, tmp_path, monkeypatch):
    """A crash mid-iteration leaves no trustworthy state: nothing is saved over the
    newest checkpoint (here there is none), and the envs are closed."""
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=100"])
    alg = trainer.learner
    original = alg.train_iter

    def train_iter():
        if trainer.context.iteration == 2:
            raise RuntimeError("boom")
        return original()

    monkeypatch.setattr(alg, "train_iter", train_iter)
    with pytest.raises(RuntimeError, match="boom"):
        trainer.run()
    assert not list((root / "train").glob("ckpt-*")) if (root / "train").exists() else True
    assert trainer.env.closed
