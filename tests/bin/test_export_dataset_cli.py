"""``python -m alf.bin.export_dataset`` in a subprocess: export of a saved replay buffer,
collect mode (greedy policy of a run, random policy from a gin file) with exact step and
episode counts, and one-line errors with exit status 2."""
import json
import os

import numpy as np
import pytest
import torch

from alf.data_structures import StepType

PROGRAM = "alf.bin.export_dataset"



@pytest.fixture(scope="module")
def sac_run(tmp_path_factory, alf_cli):
    """A finished tiny SAC Pendulum run with its buffer saved (trained in-process: the
    export command is the subject)."""
    return alf_cli.train_in_process(tmp_path_factory.mktemp("cli_runs") / "sac", alf_cli.TINY_SAC)


def _manifest(path):
    with open(os.path.join(path, "alf_dataset.json")) as f:
        return json.load(f)


def _one_error_line(p, text):
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert lines == [f"{PROGRAM}: error: {text}"], p.stderr
    assert "Traceback" not in p.stderr


def test_export_writes_the_buffer_and_refuses_to_overwrite(sac_run, tmp_path, alf_cli):
    out = tmp_path / "ds"
    p = alf_cli.run(PROGRAM, [f"--root_dir={sac_run}", f"--out={out}"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        f"wrote {out}: 128 steps in 2 rows (from replay_buffer-0000000150.pt), "
        "4 complete episodes"]
    m = _manifest(out)
    assert m["row_lengths"] == [64, 64] and m["num_episodes"] == 4
    assert m["source"]["kind"] == "replay_buffer" and m["source"]["current_pos"] == [150, 150]
    saved = torch.load(os.path.join(sac_run, "train", "replay_buffer-0000000150.pt"),
                       weights_only=True)["replay_buffer"]
    obs = saved["storage"][saved["fields"].index("time_step.observation")]
    order = [p % 64 for p in range(86, 150)]
    on_disk = np.load(out / "observation.npy", allow_pickle=False)
    assert np.array_equal(on_disk, obs[:, order].numpy())

    again = alf_cli.run(PROGRAM, [f"--root_dir={sac_run}", f"--out={out}"], tmp_path)
    _one_error_line(again, f"{out} already exists; choose another path, or replace that "
                           "dataset with --overwrite (overwrite=True)")
    forced = alf_cli.run(PROGRAM, [f"--root_dir={sac_run}", f"--out={out}", "--overwrite"],
                         tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert sorted(os.listdir(tmp_path)) == ["ds"]  # no staging or old copies left


def test_collect_greedy_records_exact_steps_and_the_policy_actions(sac_run, tmp_path, alf_cli,
                                                                   clean_gin):
    out = tmp_path / "greedy"
    p = alf_cli.run(PROGRAM, [f"--root_dir={sac_run}", f"--out={out}", "--collect_steps=101",
                              "--num_envs=2", "--seed=3"], tmp_path)
    assert p.returncode == 0, p.stderr
    from alf.datasets import open_dataset
    ds = open_dataset(str(out))
    # 101 steps over 2 envs: 51 + 50; 20-step time limit: FIRST + 20 steps = 21 per episode
    assert ds.info.row_lengths == [51, 50] and ds.info.num_steps == 101
    assert ds.episodes().tolist() == [[0, 0, 21, 1], [0, 21, 21, 1], [0, 42, 9, 0],
                                      [1, 0, 21, 1], [1, 21, 21, 1], [1, 42, 8, 0]]
    complete = ds.episodes()[:, 3] == 1
    avg = ds.episode_returns()[complete].mean()
    assert p.stdout.splitlines() == [
        f"wrote {out}: 101 steps in 2 rows, 4 complete episodes, average episode return "
        f"{avg:.2f}"]
    assert p.stderr.splitlines()[-1].startswith(
        "[collect] done: steps 101/101 | ")
    assert p.stderr.splitlines()[-1].endswith(f" | episodes 4 | average return {avg:.2f}")
    src = ds.info.source
    assert (src["kind"], src["policy"], src["iteration"], src["num_envs"], src["seed"]) == (
        "collect", "greedy", 150, 2, 3)
    # the recorded actions are the trained policy's greedy actions on the recorded
    # observations (no transformer in this run); LAST steps hold zeros
    algorithm = _load_player(sac_run)
    from alf.data_structures import TimeStep
    st = ds.steps.step_type[0, :51]
    with torch.no_grad():
        greedy = algorithm.predict_step(TimeStep(step_type=st, observation=ds.steps.observation[0, :51])).output
    last = st == StepType.LAST
    assert torch.allclose(ds.steps.action[0, :51][~last], greedy[~last], atol=1e-6)
    assert torch.all(ds.steps.action[0, :51][last] == 0)


def _load_player(root):
    from alf import config as alf_config
    from alf.experiment import EnvSpecs, build_algorithm
    from alf.environments import create_environment
    from alf.trainers.checkpointer import Checkpointer
    from alf.trainers.trainer_config import TrainerConfig
    with open(os.path.join(root, "config.gin")) as f:
        alf_config.parse_config(config_text=f.read())
    env = create_environment(num_parallel_environments=1, backend="sync")
    try:
        algorithm = build_algorithm(TrainerConfig(), EnvSpecs.of(env), "player")
    finally:
        env.close()
    _, state, _ = Checkpointer(os.path.join(root, "train")).load_latest()
    # the player is an evaluation-only build: the checkpoint's critics / optimizers are
    # skipped by alf.experiment's rule (docs/design/eval_builds.md)
    from alf.experiment import checkpoint_state_for
    algorithm.load_state_dict(checkpoint_state_for(algorithm, state["algorithm"]))
    return algorithm.eval()


def test_collect_random_from_an_example_gin(tmp_path, alf_cli):
    out = tmp_path / "random"
    p = alf_cli.run(PROGRAM, ["--conf=sac_pendulum.gin", "--policy=random", f"--out={out}",
                              "--collect_steps=45", "--conf_param",
                              "create_environment.max_episode_steps=20"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"wrote {out}: 45 steps in 1 row, 2 complete episodes, ")
    from alf.datasets import open_dataset
    ds = open_dataset(str(out))
    assert ds.episodes().tolist() == [[0, 0, 21, 1], [0, 21, 21, 1], [0, 42, 3, 0]]
    assert ds.info.source["conf"] == "sac_pendulum.gin"
    assert ds.info.source["policy"] == "random"
    a = ds.steps.action[0, :, 0]
    moving = ds.steps.step_type[0] != StepType.LAST
    assert torch.all(a.abs() <= 2.0) and torch.all(a[~moving] == 0)
    assert len(set(a[moving].tolist())) == int(moving.sum())  # uniform draws, all distinct


@pytest.mark.parametrize("make_args, expected", [
    (lambda t, run: [f"--root_dir={t}/nope", f"--out={t}/ds"],
     "--root_dir {t}/nope does not exist: give the directory of a run written by alf.bin.train"),
    (lambda t, run: [f"--root_dir={run}", f"--out={t}/ds", "--conf_param",
                     "TrainerConfig.data_transformer_ctor=[@ObservationNormalizer]"],
     "cannot export raw data from the replay buffer of {run}: its data transformer "
     "ObservationNormalizer changes the observations before they are stored "
     "(TrainerConfig.data_transformer_ctor), so the raw env data cannot be recovered; make a "
     "dataset by running the trained policy instead: python -m alf.bin.export_dataset "
     "--root_dir={run} --out=PATH --collect_steps=N"),
    (lambda t, run: [f"--root_dir={run}", f"--out={t}/ds", "--epsilon=0.1"],
     "--epsilon applies only to collect mode: add --collect_steps=N (env steps to record)"),
])
def test_errors_are_one_line_with_exit_2(tmp_path, alf_cli, make_args, expected):
    run = tmp_path / "run"  # a run dir with a config but no checkpoint yet
    run.mkdir()
    (run / "config.gin").write_text(alf_cli.TINY_SAC)
    p = alf_cli.run(PROGRAM, make_args(tmp_path, run), tmp_path)
    _one_error_line(p, expected.format(t=tmp_path, run=run))
    assert not os.path.exists(tmp_path / "ds")
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_ctrl_c_during_collection_leaves_nothing(tmp_path, alf_cli):
    import signal
    out = tmp_path / "big"
    p = alf_cli.start(PROGRAM, ["--conf=sac_pendulum.gin", "--policy=random", f"--out={out}",
                                "--collect_steps=5000000", "--progress_interval_seconds=0.2"],
                      tmp_path)
    try:
        line = p.stderr.readline()
        while line and not line.startswith("[collect] steps "):
            line = p.stderr.readline()
        assert line.startswith("[collect] steps "), "no progress line"
        assert os.listdir(tmp_path) == [f"big.tmp-{p.pid}"]  # staged, not published
        p.send_signal(signal.SIGINT)
        _, rest = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130
    assert rest.strip().splitlines()[-1] == f"{PROGRAM}: interrupted."
    assert os.listdir(tmp_path) == []


def test_collect_with_a_chosen_checkpoint(sac_run, tmp_path, alf_cli):
    """--checkpoint picks the iteration to act with (medium datasets); an absent one is one
    line listing those there are."""
    p = alf_cli.run(PROGRAM, [f"--root_dir={sac_run}", f"--out={tmp_path / 'bad'}",
                              "--collect_steps=10", "--checkpoint=7"], tmp_path)
    _one_error_line(p, f"--checkpoint=7: {os.path.join(sac_run, 'train')} has no checkpoint "
                       "of iteration 7 (it has: 150)")
    assert not (tmp_path / "bad").exists()
    out = tmp_path / "ds"
    p = alf_cli.run(PROGRAM, [f"--root_dir={sac_run}", f"--out={out}", "--collect_steps=10",
                              "--checkpoint=150"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert _manifest(out)["source"]["iteration"] == 150


def test_ctrl_c_works_when_sigint_was_inherited_ignored(tmp_path, alf_cli):
    """A `&` job of a non-interactive shell starts with SIGINT ignored; `kill -INT` must
    still stop a collection cleanly (exit 130, nothing left)."""
    import signal
    out = tmp_path / "big"
    p = alf_cli.start(PROGRAM, ["--conf=sac_pendulum.gin", "--policy=random", f"--out={out}",
                                "--collect_steps=5000000", "--progress_interval_seconds=0.2"],
                      tmp_path, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        line = p.stderr.readline()
        while line and not line.startswith("[collect] steps "):
            line = p.stderr.readline()
        p.send_signal(signal.SIGINT)
        _, rest = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130
    assert os.listdir(tmp_path) == []
