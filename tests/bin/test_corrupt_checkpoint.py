"""A corrupt newest checkpoint must not evict a good one.

The reported failure: a half-written newest checkpoint was skipped on resume with a
warning, but it stayed under its name and counted toward ``num_checkpoints``, so the
next pruning deleted the oldest *valid* checkpoint and only 2 readable ones remained.
"""
import os
import re

import torch

PARAMS = ["TrainerConfig.checkpoint_interval=2", "TrainerConfig.num_checkpoints=3"]


def _args(root, iterations):
    args = ["--conf", "tiny.gin", "--root_dir", str(root)]
    for p in PARAMS + [f"TrainerConfig.num_iterations={iterations}"]:
        args += ["--conf_param", p]
    return args


def test_unreadable_newest_checkpoint_is_set_aside_and_not_counted(alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO, "tiny.gin")
    root = tmp_path / "run"
    train = root / "train"
    # the first 6 iterations in-process (the resumes below are the subject)
    alf_cli.train_in_process(root, alf_cli.TINY_PPO,
                             PARAMS + ["TrainerConfig.num_iterations=6"])
    bad = train / "ckpt-0000000006.pt"
    with open(bad, "r+b") as f:  # killed mid-copy, a full disk, a bad sector ...
        f.truncate(os.path.getsize(bad) // 2)

    # stopped at 5 (as by a Ctrl-C there): its save prunes down to 3 checkpoints
    again = alf_cli.run("alf.bin.train", _args(root, 5), tmp_path)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert "resumed from iteration 4" in again.stderr, again.stderr
    warning = [l for l in again.stderr.splitlines() if str(bad) in l and "unreadable" in l]
    assert len(warning) == 1 and warning[0].endswith("falling back to the previous one"), \
        again.stderr
    moved = [l for l in again.stderr.splitlines() if "aside" in l]
    assert moved == [f"[alf] moved the unreadable checkpoint {bad.name} aside to "
                     f"{bad.name}.corrupt: it is not counted among the "
                     "TrainerConfig.num_checkpoints=3 kept (delete it when you no longer "
                     "need it)"], again.stderr
    assert sorted(os.listdir(train)) == ["ckpt-0000000002.pt", "ckpt-0000000004.pt",
                                         "ckpt-0000000005.pt", "ckpt-0000000006.pt.corrupt"]
    for name in ("ckpt-0000000002.pt", "ckpt-0000000004.pt", "ckpt-0000000005.pt"):
        assert torch.load(train / name, weights_only=True)["complete"]
    # the next resume starts from the newest good one without any warning
    third = alf_cli.run("alf.bin.train", _args(root, 6), tmp_path)
    assert third.returncode == 0, third.stderr
    assert "resumed from iteration 5" in third.stderr
    assert not re.search(r"is unreadable|aside to", third.stderr), third.stderr
