"""W&B mirror (``TrainerConfig.wandb_project``): what W&B records is what TensorBoard has.

W&B runs offline into ``tmp_path`` (no network); the test reads what W&B really wrote,
its ``run-<id>.wandb`` file (a leveldb-style log of protobuf records), and checks that no
W&B service process is left behind on any exit path.
"""
import glob
import json
import os
import signal
import struct
import subprocess
import sys
import types

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

pytest.importorskip("wandb")

from alf.trainers.interrupt_guard import TrainingInterrupted  # noqa: E402
from alf.trainers.summary_writer import open_summary_writer  # noqa: E402
from alf.trainers.wandb_mirror import RUN_ID_FILE, WandbMirror  # noqa: E402
from alf.utils.run_context import RunContext  # noqa: E402

W_PARAMS = ["TrainerConfig.wandb_project='alf-test'", "TrainerConfig.wandb_tags=['tiny']"]
_W_KEYS = ("_step", "_runtime", "_timestamp", "EnvironmentSteps")


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """W&B offline, every file of its own under ``tmp_path``; after the test, no W&B
    process of this one is alive, and alf's exit hooks are as before."""
    for name, sub in (("WANDB_CONFIG_DIR", "config"), ("WANDB_CACHE_DIR", "cache"),
                      ("WANDB_DATA_DIR", "data")):
        monkeypatch.setenv(name, str(tmp_path / "wandb_home" / sub))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)  # default: root_dir/wandb
    hooks = (sys.exit, sys.excepthook)
    yield
    assert _wandb_children() == []
    assert (sys.exit, sys.excepthook) == hooks


def _wandb_children():
    """This process's children named wandb* (zombies included), from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
        if int(ppid) == os.getpid() and comm.startswith("wandb"):
            found.append((int(pid), comm, state))
    return found


def _records(path):
    """The protobuf records of a ``.wandb`` file: a 7-byte header (``:W&B``, magic,
    version), then 32 KiB blocks of chunks (crc32, length, type: full/first/middle/last)."""
    from wandb.proto import wandb_internal_pb2
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if kind == 0:  # block padding
            pos += left
            continue
        pending = (b"" if kind in (1, 2) else pending) + data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def _offline_run(path):
    """What W&B recorded in one offline run: run record, history rows, exit code."""
    run, rows, exit_code = None, [], None
    for r in _records(path):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            run = r.run
        elif kind == "history":
            rows.append({i.nested_key[0] if i.nested_key else i.key: json.loads(i.value_json)
                         for i in r.history.item})
        elif kind == "exit":
            exit_code = r.exit.exit_code
    return types.SimpleNamespace(
        run=run, rows=rows, exit_code=exit_code,
        config={u.key: json.loads(u.value_json) for u in run.config.update})


def _offline_runs(root):
    return [_offline_run(p) for p in
            sorted(glob.glob(str(root / "wandb" / "offline-run-*" / "run-*.wandb")))]


def _tensorboard(root):
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _as_tensorboard(rows):
    """W&B rows as TensorBoard's series: ``tag -> [(step, value)]``, the step of a
    ``*_vs_EnvironmentSteps`` tag being its row's env steps."""
    series = {}
    for row in rows:
        for tag, value in row.items():
            if tag not in _W_KEYS:
                x = row["EnvironmentSteps"] if "_vs_EnvironmentSteps/" in tag else row["_step"]
                series.setdefault(tag, []).append((x, value))
    return series


def test_scalars_config_and_resume_are_mirrored(make_trainer, alf_cli, tmp_path, offline_wandb):
    root = tmp_path / "run"
    make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=3"] + W_PARAMS).run()
    assert _wandb_children() == []
    run_id = (root / RUN_ID_FILE).read_text().strip()
    [first] = _offline_runs(root)
    assert (first.run.run_id, first.run.project, first.run.display_name) == (
        run_id, "alf-test", "run")
    assert list(first.run.tags) == ["tiny"] and first.exit_code == 0
    # the gin config, flattened
    assert first.config["TrainerConfig.num_iterations"] == 3
    assert first.config["TrainerConfig.unroll_length"] == 8
    assert first.config["PPOAlgorithm.gamma"] == 0.98
    assert first.config["ActorDistributionNetwork.fc_layer_params"] == [8]
    assert first.config["TrainerConfig.algorithm_ctor"] == "@PPOAlgorithm"
    assert first.config["lr/LinearSchedule.start"] == 0.001
    # every TensorBoard scalar, same name, step and value; one row per iteration
    tensorboard = _tensorboard(root)
    mirrored = _as_tensorboard(first.rows)
    assert "Loss/PPOAlgorithm/pg_loss" in tensorboard and "Metrics/NumEpisodes" in tensorboard
    assert sorted(mirrored) == sorted(tensorboard)
    for tag, points in tensorboard.items():
        assert [s for s, _ in mirrored[tag]] == [s for s, _ in points], tag
        assert [v for _, v in mirrored[tag]] == pytest.approx([v for _, v in points],
                                                              rel=1e-6, abs=1e-9), tag
    assert [r["_step"] for r in first.rows] == [1, 2, 3]
    assert [r["EnvironmentSteps"] for r in first.rows] == [16, 32, 48]

    # resume: the same W&B run goes on from iteration 4
    make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=5"] + W_PARAMS).run()
    assert (root / RUN_ID_FILE).read_text().strip() == run_id
    first_again, second = _offline_runs(root)
    assert first_again.rows == first.rows
    assert second.run.run_id == run_id and second.exit_code == 0
    assert second.config["TrainerConfig.num_iterations"] == 5  # the resume's override
    assert [r["_step"] for r in second.rows] == [4, 5]
    tensorboard = _tensorboard(root)
    mirrored = _as_tensorboard(first.rows + second.rows)
    assert [s for s, _ in tensorboard["Metrics/NumEpisodes"]] == [1, 2, 3, 4, 5]
    for tag, points in tensorboard.items():
        assert [v for _, v in mirrored[tag]] == pytest.approx([v for _, v in points],
                                                              rel=1e-6, abs=1e-9), tag


@pytest.mark.parametrize("how, exit_code", [("crash", 1), ("ctrl_c", 255)])
def test_the_w_and_b_run_is_finished_on_a_crash_and_on_ctrl_c(
        make_trainer, alf_cli, tmp_path, offline_wandb, monkeypatch, how, exit_code):
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO,
                           ["TrainerConfig.num_iterations=100"] + W_PARAMS)
    original = trainer.learner.train_iter

    def train_iter():
        if trainer.context.iteration == 2:
            if how == "crash":
                raise RuntimeError("boom")
            os.kill(os.getpid(), signal.SIGINT)
        return original()

    monkeypatch.setattr(trainer.learner, "train_iter", train_iter)
    with pytest.raises(RuntimeError if how == "crash" else TrainingInterrupted):
        trainer.run()
    [recorded] = _offline_runs(root)
    assert recorded.exit_code == exit_code
    assert [r["_step"] for r in recorded.rows] == [1] + ([2] if how == "ctrl_c" else [])


def test_a_w_and_b_start_failure_is_one_warning_and_training_goes_on(
        make_trainer, alf_cli, tmp_path, offline_wandb, monkeypatch, capsys):
    import wandb

    def broken_init(**kwargs):
        raise ConnectionError("no route to api.wandb.ai")

    monkeypatch.setattr(wandb, "init", broken_init)
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, ["TrainerConfig.num_iterations=2"] + W_PARAMS)
    trainer.run()
    assert trainer.context.iteration == 2
    warnings = [l for l in capsys.readouterr().err.splitlines() if "W&B" in l]
    assert warnings == ["[alf] warning: W&B start failed (ConnectionError: no route to "
                        "api.wandb.ai); the run goes on with TensorBoard only"]
    assert [s for s, _ in _tensorboard(root)["Metrics/NumEpisodes"]] == [1, 2]
    assert not (root / RUN_ID_FILE).exists()


def test_a_w_and_b_logging_failure_is_one_warning_then_tensorboard_only(
        tmp_path, offline_wandb, capsys):
    config = types.SimpleNamespace(wandb_project="alf-test", wandb_entity=None,
                                   wandb_group=None, wandb_tags=[], wandb_mode=None)
    ctx = RunContext(num_iterations=10)
    writer = ctx.summary_writer = open_summary_writer(str(tmp_path / "run"), config, ctx)
    run = writer.mirror._run
    sent = []

    def log(row, step=None, commit=None):
        if step >= 3:
            raise OSError("wandb-core went away")
        sent.append((step, dict(row)))

    run.log = log
    for it in range(1, 6):
        ctx.begin_iteration()
        ctx.env_steps += 10
        ctx.add_scalar("Metrics/x", it * 1.5)
    writer.close()
    assert sent == [(1, {"Metrics/x": 1.5, "Metrics_vs_EnvironmentSteps/x": 1.5,
                         "EnvironmentSteps": 10}),
                    (2, {"Metrics/x": 3.0, "Metrics_vs_EnvironmentSteps/x": 3.0,
                         "EnvironmentSteps": 20})]
    warnings = [l for l in capsys.readouterr().err.splitlines() if "W&B" in l]
    assert warnings == ["[alf] warning: W&B logging failed (OSError: wandb-core went away); "
                        "the run goes on with TensorBoard only"]
    assert [s for s, _ in _tensorboard(tmp_path / "run")["Metrics/x"]] == [1, 2, 3, 4, 5]
    [recorded] = _offline_runs(tmp_path / "run")
    assert recorded.exit_code == 0  # finished all the same


class _RecordingRun:
    """Stands for a wandb run: records what is logged."""

    def __init__(self):
        self.logged, self.x_axes, self.exit_code = [], {}, None

    def log(self, row, step=None, commit=None):
        assert commit is True
        self.logged.append((step, dict(row)))

    def define_metric(self, name, step_metric=None):
        self.x_axes[name] = step_metric

    def finish(self, exit_code=None):
        self.exit_code = exit_code


def test_rows_wait_for_a_learner_threads_late_losses(capsys):
    """A learner thread writes the losses of iteration ``i`` while the main thread is at
    ``i + 2``: with ``hold=2`` they join their iteration's row; later ones are noted."""
    run, ctx = _RecordingRun(), RunContext()
    mirror = ctx.summary_writer = WandbMirror(run, ctx, hold=2)
    for it in range(1, 6):
        ctx.begin_iteration()
        ctx.env_steps = 10 * it
        ctx.add_scalar("Metrics/r", it)
        if it > 2:
            with ctx.pinned_iteration(it - 2, due=True):
                ctx.add_scalar("Loss/l", -(it - 2))
    with ctx.pinned_iteration(1, due=True):
        ctx.add_scalar("Loss/l", 99.0)  # row 1 is sent by now
    mirror.close()
    assert [step for step, _ in run.logged] == [1, 2, 3, 4, 5]
    assert run.logged[0] == (1, {"Metrics/r": 1.0, "Metrics_vs_EnvironmentSteps/r": 1.0,
                                 "Loss/l": -1.0, "Loss_vs_EnvironmentSteps/l": -1.0,
                                 "EnvironmentSteps": 10})  # the iteration's own
    assert [row.get("Loss/l") for _, row in run.logged] == [-1.0, -2.0, -3.0, None, None]
    assert run.x_axes == {"Metrics_vs_EnvironmentSteps/*": "EnvironmentSteps",
                          "Loss_vs_EnvironmentSteps/*": "EnvironmentSteps"}
    assert run.exit_code == 0
    assert capsys.readouterr().err.splitlines() == [
        "[alf] note: W&B: summaries of iteration 1 came after iteration 2 was sent (W&B "
        "steps only go forward); such late values are in TensorBoard only"]


_PROBE = """
import sys
import alf
from alf import config as alf_config
from alf.trainers.summary_writer import open_summary_writer
from alf.trainers.trainer_config import TrainerConfig
from alf.utils.run_context import RunContext
for i, params in enumerate(([], ["TrainerConfig.wandb_project='p'",
                                 "TrainerConfig.wandb_mode='disabled'"])):
    alf_config.parse_config("ppo_cart_pole.gin", params)
    ctx = RunContext()
    writer = ctx.summary_writer = open_summary_writer(f"{sys.argv[1]}{i}", TrainerConfig(), ctx)
    ctx.begin_iteration()
    ctx.add_scalar("Metrics/x", 1.0)
    print("mirror:", writer.mirror)
    writer.close()
print("wandb imported:", "wandb" in sys.modules)
"""


def test_w_and_b_off_imports_nothing(alf_cli, tmp_path):
    """No project (the default), or the project with ``wandb_mode='disabled'``."""
    probe = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "run")],
                           cwd=tmp_path, env=alf_cli.env({"WANDB_MODE": "offline"}),
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.splitlines()[-3:] == ["mirror: None", "mirror: None",
                                              "wandb imported: False"]


def test_w_and_b_without_the_package_is_one_line_and_status_2(
        alf_cli, tmp_path, monkeypatch, capsys, clean_gin):
    """``import wandb`` fails (the [wandb] extra not installed): the run refuses to start."""
    from absl import flags

    from alf.bin import train
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO, "tiny.gin")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "wandb", None)  # what `import wandb` then raises
    flags.FLAGS.unparse_flags()  # in-process: flags of an earlier call would stay
    code = train.main(["alf.bin.train", "--conf=tiny.gin", "--root_dir=run",
                       "--conf_param", "TrainerConfig.wandb_project='p'"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "alf.bin.train: error: TrainerConfig.wandb_project is set but the wandb package is "
        "not installed: pip install -e '.[wandb]' (set in --conf_param "
        "'TrainerConfig.wandb_project='p'')"]
    assert not (tmp_path / "run").exists()
