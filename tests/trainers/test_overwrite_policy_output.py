"""``TrainerConfig.overwrite_policy_output``: the stored action is the one the env
executed (ALF's ``overwrite_policy_output``), from the env (``report_executed_action``)
through the sync unroller, async env workers (in-worker inference and policy workers)
and dataset collection."""
import numpy as np
import pytest
import torch

from alf.environments import create_environment
from alf.errors import ConfigError

ENV = "tests.environments.override_env:OverriddenPendulum-v0"
OVERRIDE = 1.25  # tests/environments/override_env.py

SAC = """
include 'sac_pendulum.gin'
create_environment.env_name = "{env}"
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
CriticNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 120
TrainerConfig.initial_collect_steps = 60
TrainerConfig.num_threads = 1
TrainerConfig.mini_batch_size = 16
TrainerConfig.replay_buffer_length = 200
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1000
TrainerConfig.checkpoint_interval = 1000
"""
ASYNC = """
TrainerConfig.async_unroll = True
TrainerConfig.num_env_workers = 1
TrainerConfig.env_groups_per_worker = 1
TrainerConfig.unroll_length = 10
"""


def test_the_env_reports_what_it_executed_only_when_asked():
    """Clipped to the bounds, and the env's own override, row by row."""
    for report in (False, True):
        env = create_environment(ENV, 2, seed=0, report_executed_action=report)
        try:
            env.reset()
            seen = []
            for _ in range(3):
                seen.append(env.step(torch.tensor([[5.0], [-0.5]])).prev_action)
        finally:
            env.close()
        if report:  # clipped to [-2, 2]; the third step is the env's override
            assert torch.equal(seen[0], torch.tensor([[2.0], [-0.5]]))
            assert torch.equal(seen[2], torch.full((2, 1), OVERRIDE))
        else:  # the agent's request, as before
            assert all(torch.equal(s, torch.tensor([[5.0], [-0.5]])) for s in seen)


def _stored_actions(trainer):
    """Actions of the non-LAST stored steps (a LAST step's action is never executed)."""
    data = trainer.learner.replay_buffer.gather_all()
    keep = data.time_step.step_type != 2
    return data.action[keep].reshape(-1)


@pytest.mark.parametrize("mode", ["sync", "async", "policy_worker"])
def test_sac_stores_the_executed_action(make_trainer, tmp_path, mode, clean_gin):
    """Every third step of each episode stores the env's override (1.25, which SAC's
    sampled actions never hit exactly); without the setting none does."""
    extra = {"sync": "", "async": ASYNC,
             "policy_worker": ASYNC + "TrainerConfig.num_policy_workers = 1\n"}[mode]
    fractions = []
    for overwrite in (False, True):
        trainer = make_trainer(tmp_path / f"{mode}{overwrite}", SAC.format(env=ENV) + extra,
                               [f"TrainerConfig.overwrite_policy_output={overwrite}"])
        trainer.run()
        actions = _stored_actions(trainer)
        assert actions.numel() >= 100 and bool((actions.abs() <= 2.0).all())
        fractions.append(float((actions == OVERRIDE).float().mean()))
    without, with_ = fractions
    assert without == 0.0
    assert 0.25 <= with_ <= 0.4, fractions  # 1 in 3, less the steps no env answered yet


def test_algorithms_that_need_the_behaviour_log_prob_refuse_it(make_trainer, alf_cli, tmp_path):
    with pytest.raises(ConfigError, match="PPOAlgorithm trains with the log-probability its "
                                          "policy gave the stored action"):
        make_trainer(tmp_path / "ppo", alf_cli.TINY_PPO,
                     ["TrainerConfig.overwrite_policy_output=True"]).run()


def test_collected_dataset_records_the_executed_action(tmp_path, clean_gin):
    from alf.dataset_tools.collect import collect_dataset
    from alf.datasets import open_dataset
    conf = tmp_path / "env.gin"
    conf.write_text(f'create_environment.env_name = "{ENV}"\n')
    fractions = []
    for overwrite in (False, True):
        out = tmp_path / f"data{overwrite}"
        collect_dataset(str(out), 90, conf=str(conf), policy="random", num_envs=1,
                        progress_interval=0, overwrite_policy_output=overwrite)
        ds = open_dataset(str(out))
        actions = ds.steps.action[0, :90].reshape(-1)
        fractions.append(float((actions == OVERRIDE).float().mean()))
        assert ds.info.source.get("executed_actions", False) is overwrite
    assert fractions[0] == 0.0 and abs(fractions[1] - 1 / 3) < 0.02, fractions
