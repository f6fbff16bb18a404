"""Pretrained parts say and record what they loaded (issue 39 item 5): one log line per
part (part, source file, checkpoint iteration, sha256 prefix), no "gin bindings never
used" warning for the bindings the part used, the source file and its sha256 in
``run_info/``, and ``--rerun`` refusing a source that would now load other bytes (one
line, exit 2, nothing written)."""
import glob
import hashlib
import json
import os
import re
import shutil

from conftest import TINY_PPO, train_run


def _finetune_gin(source: str) -> str:
    return TINY_PPO + f"""
PPOAlgorithm.actor_network_ctor = @pre/pretrained
pre/pretrained.ctor = @ActorDistributionNetwork
pre/pretrained.checkpoint = "_actor_network@{source}"
TrainerConfig.num_iterations = 1
"""


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_a_pretrained_part_is_logged_recorded_and_checked_by_rerun(alf_cli, tmp_path):
    source = train_run(tmp_path / "src", TINY_PPO, ["TrainerConfig.num_iterations=2"])
    ckpt = os.path.join(source, "train", "ckpt-0000000002.pt")
    alf_cli.write_gin(tmp_path, _finetune_gin(source), "ft.gin")
    p = alf_cli.run("alf.bin.train", ["--conf=ft.gin", "--root_dir=ft"], tmp_path)
    assert p.returncode == 0, p.stderr
    loaded = [l for l in p.stderr.splitlines() if "Pretrained" in l]
    assert loaded == [
        "[alf] Pretrained ActorDistributionNetwork (pre/pretrained): loaded 4 tensors under "
        f"'_actor_network' from {ckpt} (checkpoint iteration 2, sha256 {_sha256(ckpt)[:12]})"
    ], p.stderr
    assert "never used" not in p.stderr, p.stderr
    record = json.load(open(tmp_path / "ft" / "run_info" / "start-0001.json"))
    assert record["pretrained"] == [{
        "binding": "pre/pretrained", "checkpoint": f"_actor_network@{source}",
        "prefix": "_actor_network", "file": ckpt, "iteration": 2, "sha256": _sha256(ckpt)}]

    # the same source: the rerun runs
    same = alf_cli.run("alf.bin.train", ["--rerun=ft", "--root_dir=again"], tmp_path)
    assert same.returncode == 0, same.stderr

    # the source run went on: its directory now resolves to a newer checkpoint
    train_run(tmp_path / "src", TINY_PPO, ["TrainerConfig.num_iterations=3"])
    assert os.path.exists(os.path.join(source, "train", "ckpt-0000000003.pt"))
    newer = alf_cli.run("alf.bin.train", ["--rerun=ft", "--root_dir=newer"], tmp_path)
    lines = [l for l in newer.stderr.splitlines() if l.strip()]
    assert newer.returncode == 2 and len(lines) == 1, newer.stderr
    assert re.search(r"pretrained part pre/pretrained loaded .*ckpt-0000000002.pt .*now "
                     r"resolves to .*ckpt-0000000003.pt", lines[0]), lines[0]
    assert f"pre/pretrained.checkpoint='_actor_network@{ckpt}'" in lines[0]  # the fix
    assert not os.path.exists(tmp_path / "newer")

    # the recorded file itself rewritten (other bytes under the same name)
    shutil.copyfile(os.path.join(source, "train", "ckpt-0000000003.pt"), ckpt)
    for extra in glob.glob(os.path.join(source, "train", "ckpt-0000000003.pt")):
        os.remove(extra)
    changed = alf_cli.run("alf.bin.train", ["--rerun=ft", "--root_dir=changed"], tmp_path)
    lines = [l for l in changed.stderr.splitlines() if l.strip()]
    assert changed.returncode == 2 and len(lines) == 1, changed.stderr
    assert "whose content has changed since" in lines[0] and "restore that file" in lines[0]
    assert not os.path.exists(tmp_path / "changed")


def test_a_later_run_in_the_same_process_records_only_its_own_loads(tmp_path):
    """The records of what was loaded belong to the built algorithm, not to the process:
    a second run in the same process (tests, a notebook) whose config still binds the
    same ``pre/pretrained.checkpoint`` but no longer wires ``@pre/pretrained`` in loads
    nothing, and its ``run_info`` says so (it used to list the first run's load)."""
    source = train_run(tmp_path / "src", TINY_PPO, ["TrainerConfig.num_iterations=2"])
    ckpt = os.path.join(source, "train", "ckpt-0000000002.pt")
    train_run(tmp_path / "ft", _finetune_gin(source))
    first = json.load(open(tmp_path / "ft" / "run_info" / "start-0001.json"))
    assert [r["file"] for r in first["pretrained"]] == [ckpt]

    unwired = _finetune_gin(source).replace(
        "PPOAlgorithm.actor_network_ctor = @pre/pretrained\n", "")
    train_run(tmp_path / "plain", unwired)
    second = json.load(open(tmp_path / "plain" / "run_info" / "start-0001.json"))
    assert second["pretrained"] == []

    train_run(tmp_path / "ft2", _finetune_gin(source))  # wired again: its own load
    third = json.load(open(tmp_path / "ft2" / "run_info" / "start-0001.json"))
    assert [(r["binding"], r["file"], r["sha256"]) for r in third["pretrained"]] == [
        ("pre/pretrained", ckpt, _sha256(ckpt))]
