"""CountRewardModule in a 2-rank data-parallel run (gloo on CPU, started like torchrun):
each rank observes its own envs' steps and adds every rank's, so the counts are
identical on both ranks and count every collected step of the run once."""
import torch

from ranks import run_ranks

COUNT = """
include 'ppo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 3
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.evaluate = False
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.distributed_check_interval = 1
TrainerConfig.distributed_drift = 'error'
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @PPOAlgorithm
Agent.reward_modules = [@CountRewardModule]
CountRewardModule.code_bits = 8
"""


def test_counts_are_identical_on_both_ranks_and_count_every_rank_s_steps(tmp_path):
    conf = tmp_path / "count.gin"
    conf.write_text(COUNT)
    done = run_ranks([[conf, tmp_path / "root", tmp_path / f"out{r}.pt"] for r in range(2)],
                     cwd=tmp_path)
    for r, p in enumerate(done):
        assert p.returncode == 0, f"rank {r} failed:\n{p.stderr[-3000:]}"
    r0, r1 = (torch.load(tmp_path / f"out{r}.pt", weights_only=False) for r in range(2))
    counts = r0["state"]["_reward_modules.0.counts"]
    assert torch.equal(counts, r1["state"]["_reward_modules.0.counts"])
    # 2 ranks x 2 envs x 8 steps x 3 iterations, less each env's first step
    assert r0["context"]["env_steps"] == 96 and int(counts.sum()) == 96 - 4
