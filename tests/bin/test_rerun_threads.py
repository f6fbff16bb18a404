"""``--rerun`` takes the torch thread count the old run recorded (issue 29, item 1): float
results depend on it, so a rerun on a machine with another CPU count must split every
reduction as the old run did; a ``--conf_param`` that sets it still wins."""
import json
import os

from alf.bin.rerun import recorded_thread_count
from alf.trainers import run_provenance


def _record(run_dir, threads):
    info = os.path.join(run_dir, run_provenance.RUN_INFO_DIR)
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "start-0001.json"), "w") as f:
        json.dump({"start": 1, "torch_threads": threads}, f)


def test_rerun_binds_the_recorded_thread_count(tmp_path):
    _record(str(tmp_path), 6)
    assert recorded_thread_count(str(tmp_path), []) == ["TrainerConfig.num_threads=6"]
    assert recorded_thread_count(str(tmp_path), ["TrainerConfig.num_threads=2"]) == []
    # another configurable's num_threads (an env backend's) does not count
    assert recorded_thread_count(str(tmp_path), ["create_environment.num_threads=4"]) == [
        "TrainerConfig.num_threads=6"]


def test_a_run_without_the_record_binds_nothing(tmp_path):
    assert recorded_thread_count(str(tmp_path), []) == []  # no run_info at all
    _record(str(tmp_path), None)  # a record from before alf kept the count
    assert recorded_thread_count(str(tmp_path), []) == []


def test_a_start_record_holds_the_runs_thread_count(alf_cli, tmp_path):
    gin_file = alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + "\nTrainerConfig.num_threads = 2\n")
    out = alf_cli.run("alf.bin.train", [f"--conf={gin_file}", "--root_dir=run"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    record, _ = run_provenance.latest_record(str(tmp_path / "run"))
    assert record["torch_threads"] == 2
