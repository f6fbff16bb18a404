"""Save -> load -> continue: counters, parameters, optimizer state, RNG and replay buffer."""
import csv
import glob
import os

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from alf import nest
from alf.trainers.checkpointer import Checkpointer

K = 6


def _ckpts(root_dir):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(root_dir, "train", "*")))


def _iterations_in_csv(root_dir):
    with open(os.path.join(root_dir, "progress.csv")) as f:
        return [int(r["iteration"]) for r in csv.DictReader(f)]


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                         reason="needs CUDA"))])
def test_resume_continues_from_saved_iteration(make_trainer, alf_cli, tmp_path, device):
    root = tmp_path / "run"
    dev = [f"TrainerConfig.device='{device}'"]
    params = [f"TrainerConfig.num_iterations={K}", "TrainerConfig.checkpoint_interval=1000"] + dev
    first = make_trainer(root, alf_cli.TINY_PPO, params)
    first.run()
    # only the final save: no duplicate, no periodic one
    assert _ckpts(root) == [f"ckpt-{K:010d}.pt"]
    saved_params = {k: v.detach().cpu().clone() for k, v in first.algorithm.state_dict().items()
                    if isinstance(v, torch.Tensor)}
    env_steps = first.context.env_steps
    assert env_steps == K * 2 * 8 and first.context.num_updates > 0

    _, saved, _ = Checkpointer(str(root / "train")).load_latest()
    saved_opt = saved["algorithm"]["_extra_state"]["optimizers"][0]
    assert saved["context"] == first.context.state_dict()
    for k, v in saved_params.items():
        assert torch.equal(saved["algorithm"][k], v), k

    # a fresh process would start from other weights: make sure they differ before restore
    second = make_trainer(root, alf_cli.TINY_PPO,
                          [f"TrainerConfig.num_iterations={2 * K}",
                           "TrainerConfig.checkpoint_interval=1000",
                           "TrainerConfig.random_seed=123"] + dev)
    assert any(not torch.equal(second.algorithm.state_dict()[k].cpu(), v)
               for k, v in saved_params.items())
    assert second.restore_checkpoint()
    ctx = second.context
    assert (ctx.iteration, ctx.env_steps, ctx.num_updates) == (K, env_steps,
                                                               first.context.num_updates)
    restored = second.algorithm.state_dict()
    for k, v in saved_params.items():
        assert restored[k].device.type == device
        assert torch.equal(restored[k].cpu(), v), f"{k} not restored exactly"
    # optimizer: Adam step counts and moments equal what was saved (and live on the device)
    opt = second.algorithm.optimizers()[0].state_dict()
    assert opt["state"].keys() == saved_opt["state"].keys() and opt["state"]
    for i, s in saved_opt["state"].items():
        assert float(opt["state"][i]["step"]) == float(s["step"]) > 0
        assert opt["state"][i]["exp_avg"].device.type == device
        assert torch.equal(opt["state"][i]["exp_avg"].cpu(), s["exp_avg"])
        assert torch.equal(opt["state"][i]["exp_avg_sq"].cpu(), s["exp_avg_sq"])
    # RNG states are restored too
    assert torch.equal(torch.get_rng_state(), saved["rng"]["torch"])

    second.run()  # restores again (idempotent) and trains K more iterations
    assert second.context.iteration == 2 * K
    assert second.context.env_steps == 2 * env_steps
    assert _iterations_in_csv(root) == list(range(1, 2 * K + 1))  # continued, not restarted
    # TensorBoard keeps both halves of both series (vs iterations and vs env steps)
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.step for e in acc.Scalars("Speed/FPS")] == list(range(1, 2 * K + 1))
    assert [e.step for e in acc.Scalars("Speed_vs_EnvironmentSteps/FPS")] == [
        16 * i for i in range(1, 2 * K + 1)]
    assert f"ckpt-{2 * K:010d}.pt" in _ckpts(root)
    assert any(not torch.equal(second.algorithm.state_dict()[k].cpu(), v)
               for k, v in saved_params.items()), "no training happened after resume"

    # running a finished run again does nothing and writes no new checkpoint
    before = _ckpts(root)
    third = make_trainer(root, alf_cli.TINY_PPO, [f"TrainerConfig.num_iterations={2 * K}"] + dev)
    mtime = os.path.getmtime(root / "train" / f"ckpt-{2 * K:010d}.pt")
    third.run()
    assert third.context.iteration == 2 * K
    assert _ckpts(root) == before
    assert os.path.getmtime(root / "train" / f"ckpt-{2 * K:010d}.pt") == mtime


def test_keep_last_n_with_replay_buffer(make_trainer, alf_cli, tmp_path):
    root = tmp_path / "run"
    params = ["TrainerConfig.num_iterations=5", "TrainerConfig.checkpoint_interval=1",
              "TrainerConfig.num_checkpoints=2", "TrainerConfig.save_replay_buffer=True"]
    trainer = make_trainer(root, alf_cli.TINY_PPO, params)
    trainer.run()
    assert _ckpts(root) == ["ckpt-0000000004.pt", "ckpt-0000000005.pt",
                            "replay_buffer-0000000004.pt", "replay_buffer-0000000005.pt"]
    assert not glob.glob(os.path.join(root, "**", "*.tmp"), recursive=True)
    buffer = {k: v.clone() for k, v in
              nest.flatten_with_paths(trainer.learner.replay_buffer.state_dict())
              if isinstance(v, torch.Tensor)}
    assert buffer
    assert trainer.learner.replay_buffer.total_size() > 0

    # the buffer comes back with the checkpoint
    again = make_trainer(root, alf_cli.TINY_PPO, params[1:] + ["TrainerConfig.num_iterations=6"])
    assert again.learner.replay_buffer.total_size() == 0
    assert again.restore_checkpoint()
    for k, v in nest.flatten_with_paths(again.learner.replay_buffer.state_dict()):
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, buffer[k]), k
    again.close()
