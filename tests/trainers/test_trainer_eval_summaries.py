"""TensorBoard summaries: training metrics (vs iterations and env steps) and evaluation."""
import glob
import os

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def test_evaluation_and_metrics_summaries(make_trainer, alf_cli, tmp_path):
    root = tmp_path / "run"
    trainer = make_trainer(root, alf_cli.TINY_PPO, [
        "TrainerConfig.num_iterations=5", "TrainerConfig.evaluate=True",
        "TrainerConfig.eval_interval=2", "TrainerConfig.num_eval_episodes=2",
        "TrainerConfig.num_eval_environments=2", "create_environment.max_episode_steps=50"])
    trainer.run()
    events = glob.glob(os.path.join(root, "events.out.tfevents.*"))
    assert len(events) == 1
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in ("Eval/AverageReturn", "Eval/AverageEpisodeLength",
                "Metrics/AverageReturn", "Metrics_vs_EnvironmentSteps/AverageReturn",
                "Speed/FPS"):
        assert tag in tags, sorted(tags)
    assert any(t.startswith("Loss/") for t in tags), sorted(tags)

    evals = acc.Scalars("Eval/AverageReturn")
    # every eval_interval iterations, and at the last one (the policy the run ends with)
    assert [e.step for e in evals] == [2, 4, 5]
    # CartPole: reward 1 per step, episodes of 8..50 steps (time limit set above)
    assert all(8 <= e.value <= 50 for e in evals), [e.value for e in evals]
    lengths = acc.Scalars("Eval/AverageEpisodeLength")
    assert [e.value for e in lengths] == [e.value for e in evals]

    # the _vs_EnvironmentSteps series is the same values against env steps (16 per iteration)
    by_iter = acc.Scalars("Metrics/AverageReturn")
    by_steps = acc.Scalars("Metrics_vs_EnvironmentSteps/AverageReturn")
    assert [e.value for e in by_iter] == [e.value for e in by_steps]
    assert [e.step * 16 for e in by_iter] == [e.step for e in by_steps]
