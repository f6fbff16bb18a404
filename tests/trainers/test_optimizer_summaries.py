"""``Optimizer/<Algorithm>/<k>/learning_rate`` and ``.../grad_norm``: written by
``update_with_gradient`` for each optimizer, on summary iterations only
(alf.utils.optimizer_summaries)."""
import glob
import os

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import TINY_PPO, TINY_SAC, train_run


def _scalars(root):
    acc = EventAccumulator(glob.glob(os.path.join(str(root), "events.out.tfevents.*"))[0],
                           size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_ppo_writes_the_lr_of_its_schedule_and_the_norm_before_clipping(tmp_path):
    # 6 iterations, summaries every 3rd (and the first): iterations 1, 3, 6
    root = train_run(tmp_path / "ppo", TINY_PPO, [
        "TrainerConfig.num_iterations=6", "TrainerConfig.summary_interval=3",
        "alf.optimizers.Adam.gradient_clipping=1e-6"])
    tags = _scalars(root)
    lr = tags["Optimizer/PPOAlgorithm/0/learning_rate"]
    norm = tags["Optimizer/PPOAlgorithm/0/grad_norm"]
    assert [s for s, _ in lr] == [s for s, _ in norm] == [1, 3, 6]
    assert [s for s, _ in tags["Loss/PPOAlgorithm/loss"]][:1] == [1]
    # lr/LinearSchedule 1e-3 -> 0 over 6 iterations, at the progress of the iteration
    assert [v for _, v in lr] == pytest.approx([1e-3 * (1 - i / 6) for i in (1, 3, 6)])
    # before clipping: far above the 1e-6 it is clipped to
    assert all(v > 1e-3 for _, v in norm), norm
    assert not [t for t in tags if t.startswith("Optimizer/PPOAlgorithm/1/")]


def test_sac_writes_one_pair_per_optimizer_without_clipping(tmp_path):
    root = train_run(tmp_path / "sac", TINY_SAC, ["TrainerConfig.summary_interval=10",
                                                  "TrainerConfig.save_replay_buffer=False"])
    tags = _scalars(root)
    for k in range(3):  # actor, critic, alpha: the order of add_optimizer
        lr = tags[f"Optimizer/SacAlgorithm/{k}/learning_rate"]
        norm = tags[f"Optimizer/SacAlgorithm/{k}/grad_norm"]
        assert [v for _, v in lr] == pytest.approx([1e-3] * len(lr))
        assert all(v > 0 for _, v in norm)
        assert [s for s, _ in lr] == [s for s, _ in norm]
        # summary iterations only: the first that trains (after 260 random steps from 2
        # envs: iteration 130), then every 10th of the 150 iterations
        assert [s for s, _ in lr] == [130, 140, 150]
    assert "Optimizer/SacAlgorithm/3/learning_rate" not in tags
