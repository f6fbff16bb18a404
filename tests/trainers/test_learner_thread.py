"""TrainerConfig.learner_thread: collection on the main thread, training on a learner
thread (alf/trainers/learner_thread.py)."""
import os
import signal
import threading
import time

import pytest
import torch

from alf.errors import ConfigError
from alf.trainers.interrupt_guard import TrainingInterrupted
from alf.trainers.learner_thread import LearnerStalledError, ThreadedRunner

THREAD = ["TrainerConfig.learner_thread=True"]


def _learner_threads():
    return [t for t in threading.enumerate() if t.name == "alf-learner"]


def _ckpt(root, iteration):
    return torch.load(os.path.join(str(root), "train", f"ckpt-{iteration:010d}.pt"),
                      weights_only=False)


def test_ppo_trains_every_collected_unroll_on_the_thread(make_trainer, alf_cli, tmp_path):
    """Every iteration's unroll is trained exactly once (epochs x mini-batches), the final
    checkpoint is taken after the queue drained, and no thread is left behind."""
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, THREAD + ["TrainerConfig.num_iterations=6"])
    trainer.run()
    ctx = trainer.context
    # 2 envs x 8 steps = 16 steps per unroll; whole-buffer: 2 epochs x 2 mini-batches of 8
    state = _ckpt(root, 6)
    assert state["context"]["iteration"] == 6 and state["context"]["env_steps"] == 6 * 16
    assert state["context"]["num_updates"] == ctx.num_updates == 6 * 2 * 2
    assert not _learner_threads()
    assert trainer.env.closed


def test_ppo_trains_each_unroll_alone_when_the_thread_is_late(make_trainer, alf_cli,
                                                               tmp_path, monkeypatch):
    """A learner thread that picks up unroll k only after the main thread stored unroll
    k+1 (a busy machine) used to gather both as one batch and then train the next token
    on an empty buffer: 22 of 24 updates. Each unroll is trained on its own 16 steps."""
    from alf.trainers.learner import Learner
    original = Learner.train_collected
    seen = []

    def late(self, batch):
        time.sleep(0.3)  # the main thread collects and stores the next unroll meanwhile
        if batch is not True:
            seen.append(int(batch.step_type.shape[0] * (batch.step_type.shape[1] - 1)))
        return original(self, batch)

    monkeypatch.setattr(Learner, "train_collected", late)
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, THREAD + ["TrainerConfig.num_iterations=6"])
    trainer.run()
    assert trainer.context.num_updates == 6 * 2 * 2
    # 2 envs x 8 new steps each (+ the step kept from the unroll before, but for the first)
    assert seen == [2 * 7] + [16] * 5


def test_sac_updates_match_the_main_loop_count(make_trainer, alf_cli, tmp_path):
    """An off-policy run does the same number of gradient steps as without the thread
    (the data differ: the policy acting is up to learner_queue_size passes behind)."""
    params = ["TrainerConfig.num_env_steps=0", "TrainerConfig.num_iterations=180",
              "TrainerConfig.initial_collect_steps=100", "TrainerConfig.num_updates_per_train_iter=2"]
    counts = []
    for threaded in (False, True):
        root = tmp_path / f"run{int(threaded)}"
        trainer = make_trainer(root, alf_cli.TINY_SAC,
                               params + [f"TrainerConfig.learner_thread={threaded}"])
        trainer.run()
        counts.append(trainer.context.num_updates)
    # 2 envs: iterations 1-49 end below 100 env steps (random, no training); iteration 50
    # collects randomly and then trains: 131 iterations x 2 updates
    assert counts == [262, 262]
    assert not _learner_threads()


def test_resume_after_a_threaded_run_continues_from_its_checkpoint(make_trainer, alf_cli,
                                                                   tmp_path):
    root = tmp_path / "run"
    first = make_trainer(root, alf_cli.TINY_PPO, THREAD + ["TrainerConfig.num_iterations=3"])
    first.run()
    again = make_trainer(root, alf_cli.TINY_PPO, THREAD + ["TrainerConfig.num_iterations=5"])
    again.run()
    assert again.context.iteration == 5 and again.context.env_steps == 5 * 16
    assert _ckpt(root, 5)["context"]["num_updates"] == again.context.num_updates


def test_sigint_saves_a_drained_checkpoint(make_trainer, alf_cli, tmp_path, monkeypatch):
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, THREAD + ["TrainerConfig.num_iterations=100"])
    learner = trainer.learner
    original = learner.collect_step

    def collect():
        if trainer.context.iteration == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return original()

    monkeypatch.setattr(learner, "collect_step", collect)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.run()
    assert info.value.checkpoint == str(root / "train" / "ckpt-0000000003.pt")
    state = _ckpt(root, 3)
    # all three collected unrolls were trained before the save
    assert state["context"]["num_updates"] == trainer.context.num_updates
    # per unroll: 2 envs x 8 steps = 16 one-step segments = 2 mini-batches of 8, x 2 epochs
    assert trainer.context.num_updates == 3 * 2 * 2
    assert not _learner_threads()


def test_an_error_on_the_learner_thread_stops_the_run_with_it(make_trainer, alf_cli, tmp_path,
                                                             monkeypatch):
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, THREAD + ["TrainerConfig.num_iterations=50"])

    def boom(batch):
        raise RuntimeError("learner boom")

    monkeypatch.setattr(trainer.learner, "train_collected", boom)
    with pytest.raises(RuntimeError, match="learner boom"):
        trainer.run()
    assert trainer.context.iteration < 50
    assert not list((root / "train").glob("ckpt-*"))  # a crash saves nothing
    assert trainer.env.closed and not _learner_threads()


def test_slow_work_outside_collection_is_not_a_stall(make_trainer, alf_cli, tmp_path,
                                                    monkeypatch):
    """Only a collection that takes longer than learner_queue_timeout_s is a stall: a slow
    checkpoint (the learner idle, the queue empty) is not."""
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, THREAD + [
        "TrainerConfig.learner_queue_timeout_s=0.5", "TrainerConfig.checkpoint_interval=2"])
    checkpoints = trainer._checkpoints
    original = checkpoints.save

    def slow_save(*args, **kwargs):
        time.sleep(1.5)
        return original(*args, **kwargs)

    monkeypatch.setattr(checkpoints, "save", slow_save)
    trainer.run()
    assert trainer.context.iteration == 4


def test_the_lag_counts_training_passes_between_collecting_and_training(
        make_trainer, alf_cli, tmp_path, monkeypatch):
    """The learner is held while the main thread collects two unrolls: the second was
    collected with the policy of before the first was trained, so it is 1 pass behind."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO, THREAD)
    release = threading.Event()
    original = trainer.learner.train_collected

    def held(batch):
        release.wait(30)
        return original(batch)

    monkeypatch.setattr(trainer.learner, "train_collected", held)
    runner = ThreadedRunner(trainer.learner, queue_size=2, timeout_s=60)
    try:
        runner.run_iteration()
        runner.run_iteration()
        release.set()
        runner.drain()
        runner.run_iteration()  # reports the lag of the second unroll (and maybe the first's)
        # the first unroll was trained with the policy it was collected with (lag 0); the
        # second 1 pass later; whether the first's 0 is reported with it depends on when
        # the learner picked it up
        assert runner.progress_text() in (" | learner lag 1.0/1", " | learner lag 0.5/1")
    finally:
        runner.close()
        trainer.close()
    assert not _learner_threads()


def test_a_hung_collection_is_one_named_error_raised_in_the_blocked_main_thread(
        make_trainer, alf_cli, tmp_path, monkeypatch):
    """The envs hang (the main thread blocks in a system call, forever): the learner
    thread names the wait and the main thread is interrupted with that error."""
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO,
                           THREAD + ["TrainerConfig.learner_queue_timeout_s=0.5"])
    original = trainer.learner.collect_step

    def hung_collect():
        if trainer.context.iteration == 2:
            time.sleep(3600)  # interrupted by the learner thread's signal
        return original()

    monkeypatch.setattr(trainer.learner, "collect_step", hung_collect)
    start = time.monotonic()
    with pytest.raises(LearnerStalledError, match="learner_queue_timeout_s"):
        trainer.run()
    assert time.monotonic() - start < 30
    assert trainer.env.closed and not _learner_threads()


@pytest.mark.parametrize("conf, params, message", [
    ("TINY_A2C", [], "is on-policy and trains through its rollout's autograd graph"),
])
def test_on_policy_algorithms_are_refused(make_trainer, alf_cli, tmp_path, conf, params,
                                          message):
    with pytest.raises(ConfigError, match=message):  # at build time: nothing written
        make_trainer(tmp_path / "run", getattr(alf_cli, conf), THREAD + params)
    assert not (tmp_path / "run").exists()


def test_deterministic_async_is_refused(clean_gin):
    from alf.trainers.trainer_config import TrainerConfig
    from alf.algorithms.appo_algorithm import APPOAlgorithm
    with pytest.raises(ConfigError, match="not bit-identical"):
        TrainerConfig(algorithm_ctor=APPOAlgorithm, num_iterations=1, async_unroll=True,
                      async_mode="deterministic", learner_thread=True)


def test_the_learner_thread_keeps_a_cpu_for_acting_only_when_this_process_acts():
    """A sync unroll acts on the main thread: the learner thread takes the run's thread
    count less one. An async unroll acts in env worker processes: it takes them all
    (keeping one back left a core idle: 372 vs 453 agent steps/s, appo_atari.gin, 2 cores)."""
    import threading
    from types import SimpleNamespace

    from alf.trainers.learner_thread import _follow_thread_governor
    context = SimpleNamespace(cpu_governor=SimpleNamespace(threads=3))
    seen = {}

    def in_a_thread(acts_here):  # torch's OpenMP pool size is per calling thread
        _follow_thread_governor(context, 1, acts_here)
        seen[acts_here] = torch.get_num_threads()

    for acts_here in (True, False):
        t = threading.Thread(target=in_a_thread, args=(acts_here,))
        t.start()
        t.join()
    assert seen == {True: 2, False: 3}
