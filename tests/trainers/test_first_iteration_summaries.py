"""Summaries are written at iteration 1 too (docs/quickstart.md), losses included: a run
shorter than ``summary_interval`` (50) still shows every tag in TensorBoard."""
import os

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from alf.utils.run_context import RunContext


def _scalars(root) -> dict:
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.mark.parametrize("conf, alg, terms", [
    ("ppo_cart_pole.gin", "PPOAlgorithm", ("pg_loss", "td_loss", "neg_entropy")),
    ("ac_cart_pole.gin", "ActorCriticAlgorithm", ("pg_loss", "td_loss", "neg_entropy")),
])
def test_a_run_shorter_than_summary_interval_writes_losses_at_iteration_1(
        alf_cli, tmp_path, conf, alg, terms):
    run = alf_cli.run("alf.bin.train", [f"--conf={conf}", "--root_dir=runs/short",
                                        "--conf_param", "TrainerConfig.num_iterations=3",
                                        "--conf_param", "TrainerConfig.num_env_steps=0",
                                        "--conf_param", "TrainerConfig.evaluate=False"],
                      tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    root = tmp_path / "runs" / "short"
    assert len([f for f in os.listdir(root) if f.startswith("events.out.tfevents")]) == 1
    scalars = _scalars(root)
    for name in ("loss",) + terms:
        assert scalars.get(f"Loss/{alg}/{name}") == [1], (name, sorted(scalars))
        assert f"Loss_vs_EnvironmentSteps/{name}" in {t.replace(f"/{alg}", "")
                                                      for t in scalars}, sorted(scalars)
    assert scalars["Metrics/NumEpisodes"] == [1]
    # progress.csv: a row at iteration 1 and one at the end
    rows = (root / "progress.csv").read_text().strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "3"]


def test_off_policy_losses_from_the_first_iteration_that_trains(alf_cli, tmp_path):
    """SAC collects 100 random steps (100 iterations) before its first update: with
    ``summary_interval`` 200 a 150-iteration run used to write no Loss/ tag at all."""
    gin_file = alf_cli.write_gin(tmp_path, alf_cli.TINY_SAC + """
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 12
TrainerConfig.initial_collect_steps = 20
TrainerConfig.summary_interval = 200
TrainerConfig.save_replay_buffer = False
""")
    run = alf_cli.run("alf.bin.train", [f"--conf={gin_file}", "--root_dir=run"], tmp_path,
                      timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    scalars = _scalars(tmp_path / "run")
    loss_tags = [t for t in scalars if t.startswith("Loss/") and "_vs_" not in t]
    assert loss_tags, sorted(scalars)
    # 2 envs x 1-step unrolls: iteration 10 reaches the 20 random steps and trains first
    assert all(scalars[t] == [10] for t in loss_tags), {t: scalars[t] for t in loss_tags}
    assert scalars["Metrics/NumEpisodes"] == [1, 10]


def test_run_context_summarizes_iteration_1_only_when_asked():
    writer = object()
    first = RunContext(summary_writer=writer, summary_interval=50)
    off = RunContext(summary_writer=writer, summary_interval=50, summarize_first_interval=False)
    due = {}
    for ctx, name in ((first, "first"), (off, "off")):
        due[name] = []
        for it in range(1, 101):
            ctx.begin_iteration()
            ctx.num_updates += 1
            if ctx.should_summarize():
                due[name].append(it)
    assert due == {"first": [1, 50, 100], "off": [50, 100]}
    # per gradient step (update_counter_every_mini_batch): the first update too
    first.num_updates, off.num_updates = 1, 1
    assert first.should_summarize_update() and not off.should_summarize_update()
    # no update in iterations 1-3 (random collection): the first one that trains is due
    late = RunContext(summary_writer=writer, summary_interval=50)
    trained_in = []
    for it in range(1, 8):
        late.begin_iteration()
        if it >= 4:
            late.num_updates += 2
        if late.should_summarize():
            trained_in.append(it)
    assert trained_in == [1, 4]
