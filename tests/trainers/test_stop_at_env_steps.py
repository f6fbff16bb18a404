"""TrainerConfig.stop_at_env_steps ends a process at a step count (evaluation, checkpoint)
without moving the horizon schedules anneal over; a resume with a larger value goes on."""
import glob
import os

from alf.studies.run_data import read_curve


def test_stop_at_env_steps_pauses_a_run_that_a_resume_continues(make_trainer, alf_cli, tmp_path):
    root = tmp_path / "run"
    params = ["TrainerConfig.num_iterations=0", "TrainerConfig.num_env_steps=64",
              "TrainerConfig.evaluate=True", "TrainerConfig.eval_interval=100",
              "TrainerConfig.num_eval_episodes=1", "create_environment.max_episode_steps=20"]
    trainer = make_trainer(root, alf_cli.TINY_PPO, params + ["TrainerConfig.stop_at_env_steps=32"])
    trainer.run()
    assert trainer._context.env_steps == 32  # 2 envs x 8 steps per iteration: 2 iterations
    assert trainer._context.progress() == 0.5  # schedules still anneal over 64 env steps
    assert [os.path.basename(p) for p in glob.glob(str(root / "train" / "ckpt-*.pt"))] == \
        ["ckpt-0000000002.pt"]
    assert list(read_curve(str(root), "eval_return").env_steps) == [32]  # the segment's end

    resumed = make_trainer(root, alf_cli.TINY_PPO, params + ["TrainerConfig.stop_at_env_steps=0"])
    resumed.run()
    assert resumed._context.env_steps == 64 and resumed._context.progress() == 1.0
    assert list(read_curve(str(root), "eval_return").env_steps) == [32, 64]


def test_a_run_paused_by_stop_at_env_steps_names_it_on_resume(make_trainer, alf_cli, tmp_path,
                                                              capsys):
    root = tmp_path / "run"
    params = ["TrainerConfig.num_iterations=0", "TrainerConfig.num_env_steps=64",
              "TrainerConfig.stop_at_env_steps=32"]
    make_trainer(root, alf_cli.TINY_PPO, params).run()
    capsys.readouterr()
    make_trainer(root, alf_cli.TINY_PPO, params).run()  # the same limit again: nothing to do
    err = capsys.readouterr().err
    assert "is already complete" in err and "raise TrainerConfig.stop_at_env_steps" in err
