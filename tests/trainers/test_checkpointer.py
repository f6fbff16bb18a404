"""Checkpoint files: atomic write, keep-last-N, fallback past corrupt files."""
import logging
import os

import pytest
import torch

from alf.errors import CheckpointError
from alf.trainers.checkpointer import Checkpointer


def _state(i):
    return {"w": torch.full((3,), float(i)), "context": {"iteration": i}}


def test_keep_last_n_and_no_tmp_files(tmp_path):
    ckpt = Checkpointer(str(tmp_path / "train"), num_checkpoints=2)
    # a writer killed mid-save leaves a temp file behind; the next save cleans it up
    os.makedirs(tmp_path / "train")
    (tmp_path / "train" / "ckpt-0000000099.pt.tmp").write_bytes(b"half written")
    for i in (1, 2, 3, 10):
        ckpt.save(i, _state(i), {"storage": [torch.arange(i)]})
    assert sorted(os.listdir(tmp_path / "train")) == [
        "ckpt-0000000003.pt", "ckpt-0000000010.pt",
        "replay_buffer-0000000003.pt", "replay_buffer-0000000010.pt"]
    assert [i for i, _ in ckpt.list_checkpoints()] == [10, 3]  # numeric, newest first
    iteration, state, rb = ckpt.load_latest()
    assert iteration == 10 and torch.equal(state["w"], torch.full((3,), 10.0))
    assert torch.equal(rb["storage"][0], torch.arange(10))


def _two_checkpoints(tmp_path):
    ckpt = Checkpointer(str(tmp_path / "train"), num_checkpoints=3)
    ckpt.save(2, _state(2))
    newest = ckpt.save(4, _state(4))
    return ckpt, newest


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_newest_falls_back_with_warning(tmp_path, caplog, damage):
    ckpt, newest = _two_checkpoints(tmp_path)
    if damage == "truncate":
        size = os.path.getsize(newest)
        with open(newest, "r+b") as f:
            f.truncate(size // 2)
    else:
        with open(newest, "wb") as f:
            f.write(b"" if damage == "empty" else b"this is not a torch file\n" * 10)
    with caplog.at_level(logging.WARNING):
        iteration, state, _ = ckpt.load_latest()
    assert iteration == 2 and torch.equal(state["w"], torch.full((3,), 2.0))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(newest in w for w in warnings), warnings
    # a whole reason, not torch's message cut mid-sentence
    reason = {"truncate": "truncated or corrupt file", "garbage": "not a torch checkpoint file",
              "empty": "empty file"}[damage]
    line = next(w for w in warnings if newest in w)
    assert f"({reason}" in line and line.endswith("falling back to the previous one"), line
    assert "This is an internal miniz error" not in line


def test_all_checkpoints_unreadable_is_an_error(tmp_path, caplog):
    """Silently starting over would discard the run (and pruning would then delete the
    new checkpoints, which sort before the bad higher-numbered ones)."""
    ckpt, newest = _two_checkpoints(tmp_path)
    for _, path in ckpt.list_checkpoints():
        with open(path, "wb") as f:
            f.write(b"garbage")
    with pytest.raises(CheckpointError, match="move them away"):
        ckpt.load_latest()
    assert Checkpointer(str(tmp_path / "empty")).load_latest() is None


def test_trainer_restores_previous_checkpoint_when_newest_is_truncated(
        make_trainer, alf_cli, tmp_path, caplog):
    root = tmp_path / "run"
    params = ["TrainerConfig.num_iterations=4", "TrainerConfig.checkpoint_interval=2",
              "TrainerConfig.num_checkpoints=3"]
    first = make_trainer(root, alf_cli.TINY_PPO, params)
    first.run()
    files = sorted(os.listdir(root / "train"))
    assert files == ["ckpt-0000000002.pt", "ckpt-0000000004.pt"]
    at_two = torch.load(root / "train" / files[0], weights_only=True)
    newest = str(root / "train" / files[1])
    with open(newest, "r+b") as f:
        f.truncate(os.path.getsize(newest) // 2)

    second = make_trainer(root, alf_cli.TINY_PPO, params)
    with caplog.at_level(logging.WARNING):
        assert second.restore_checkpoint()
    assert any(newest in r.getMessage() for r in caplog.records
               if r.levelno == logging.WARNING)
    assert second.context.iteration == 2
    assert second.context.env_steps == at_two["context"]["env_steps"] == 2 * 2 * 8
    state = second.algorithm.state_dict()
    for k, v in at_two["algorithm"].items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(state[k], v), k
    second.run()  # continues 3, 4 and replaces the bad file with a good one
    assert second.context.iteration == 4
    assert torch.load(newest, weights_only=True)["context"]["iteration"] == 4


def test_last_unreadable_checkpoint_does_not_promise_a_fallback(tmp_path, caplog):
    """The warning for the oldest checkpoint used to say "falling back to the previous one"
    when there was none left."""
    ckpt, _ = _two_checkpoints(tmp_path)
    for _, path in ckpt.list_checkpoints():
        with open(path, "wb") as f:
            f.write(b"garbage")
    with caplog.at_level(logging.WARNING), pytest.raises(CheckpointError):
        ckpt.load_latest()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert warnings[0].endswith("falling back to the previous one"), warnings
    assert warnings[1].endswith("no older checkpoint is left"), warnings
    # nothing is moved or deleted when none is readable: the user decides
    assert len(ckpt.list_checkpoints()) == 2


def test_unreadable_checkpoints_are_set_aside_only_when_asked(tmp_path):
    """Readers (play, export_dataset) only skip; the trainer that resumed moves them aside
    so that they no longer count toward ``num_checkpoints``."""
    ckpt, newest = _two_checkpoints(tmp_path)
    with open(newest, "wb") as f:
        f.write(b"garbage")
    assert ckpt.load_latest()[0] == 2
    assert os.path.exists(newest)
    assert ckpt.set_aside_unreadable() == [(newest, newest + ".corrupt")]
    assert not os.path.exists(newest) and os.path.exists(newest + ".corrupt")
    assert [i for i, _ in ckpt.list_checkpoints()] == [2]
    assert ckpt.set_aside_unreadable() == []


def test_a_checkpoint_that_cannot_be_opened_is_not_called_corrupt(tmp_path, monkeypatch):
    """Permission denied (or out of memory) says nothing about the file's content: the run
    stops with one error and the file is neither skipped nor set aside."""
    ckpt, newest = _two_checkpoints(tmp_path)
    real_load = torch.load

    def denied(path, *args, **kwargs):
        if str(path) == newest:
            raise PermissionError(13, "Permission denied", path)
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(torch, "load", denied)
    with pytest.raises(CheckpointError, match="cannot read checkpoint .*Permission denied; "
                                              "nothing was changed"):
        ckpt.load_latest()
    assert ckpt.set_aside_unreadable() == []
    assert os.path.exists(newest)


def test_a_non_finite_state_is_refused_by_the_callers_error_and_nothing_is_written(tmp_path):
    """With the run's guard on, the Trainer passes ``refuse_non_finite``: its error is
    raised instead of the warning, nothing is written, the older checkpoint stays."""
    ckpt = Checkpointer(str(tmp_path), num_checkpoints=1)
    ckpt.save(1, {"algorithm": {"w": torch.ones(2)}})
    refused = []

    def refuse(name, kind):
        refused.append((name, kind))
        return RuntimeError(f"{name} is {kind}")

    with pytest.raises(RuntimeError, match=r"^norm\.var is inf$"):
        ckpt.save(2, {"algorithm": {"w": torch.ones(2), "norm": {"var": torch.tensor(
            [1.0, float("inf")])}}}, refuse_non_finite=refuse)
    assert refused == [("norm.var", "inf")]
    assert sorted(os.listdir(tmp_path)) == ["ckpt-0000000001.pt"]
