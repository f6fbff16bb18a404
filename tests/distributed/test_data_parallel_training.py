"""Two ranks (gloo on CPU, started like torchrun starts them) train PPO and SAC:
parameters stay bit-identical, env steps are summed over ranks, only rank 0 writes
files, and a 2-rank run resumes exactly (every rank gets back its own RNG stream and
replay buffer)."""
import os

import pytest
import torch

from ranks import run_ranks

# PPO with an observation normaliser (its statistics are merged over ranks) and 2
# mini-batch updates per iteration: 2 envs x 8 steps per rank and iteration.
PPO = """
include 'ppo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.data_transformer_ctor = @ObservationNormalizer
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 6
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 2
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.distributed_check_interval = 2
TrainerConfig.distributed_drift = 'error'
"""

# SAC (actor, twin critics with Polyak targets, alpha) from a replay buffer per rank,
# saved with each checkpoint.
SAC = """
include 'sac_pendulum.gin'
create_environment.num_parallel_environments = 2
create_environment.max_episode_steps = 20
ActorDistributionNetwork.fc_layer_params = (8,)
CriticNetwork.fc_layer_params = (8,)
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 40
TrainerConfig.initial_collect_steps = 40
TrainerConfig.num_threads = 1
TrainerConfig.mini_batch_size = 16
TrainerConfig.replay_buffer_length = 64
TrainerConfig.save_replay_buffer = True
TrainerConfig.summary_interval = 10
TrainerConfig.checkpoint_interval = 1000
TrainerConfig.distributed_check_interval = 10
TrainerConfig.distributed_drift = 'error'
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _train(tmp_path, conf, tag, extra=(), inspect=False, world=2):
    """Run ``world`` ranks; rank r gets its own root dir ``<tag>_root<r>`` (only rank
    0's may appear) and writes its snapshot to ``<tag>_out<r>.pt``."""
    args = []
    for r in range(world):
        a = [conf, tmp_path / f"{tag}_root{r}" if r else tmp_path / f"{tag}_root0",
             tmp_path / f"{tag}_out{r}.pt"]
        args.append(a + (["--inspect_restore"] if inspect else []) + list(extra))
    done = run_ranks(args, cwd=tmp_path)
    for r, p in enumerate(done):
        assert p.returncode == 0, f"rank {r} failed:\n{p.stderr[-3000:]}"
    return [torch.load(tmp_path / f"{tag}_out{r}.pt", weights_only=False) for r in range(world)]


def _assert_identical(a: dict, b: dict, what: str):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{what}: {k} differs between ranks"


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


def test_ppo_two_ranks_identical_parameters_summed_steps_rank0_files(tmp_path):
    conf = _write(tmp_path, "ppo.gin", PPO)
    r0, r1 = _train(tmp_path, conf, "ppo")
    _assert_identical(r0["state"], r1["state"], "PPO")
    # the observation normaliser saw both ranks' steps (merged, identically)
    counts = [v for k, v in r0["state"].items() if k.endswith("count")]
    assert counts and all(int(c) == 6 * 2 * 2 * 8 for c in counts)
    # 6 iterations x 2 ranks x 2 envs x 8 steps, counted identically on both ranks
    assert r0["context"]["env_steps"] == r1["context"]["env_steps"] == 6 * 2 * 2 * 8
    assert r0["context"]["num_updates"] == r1["context"]["num_updates"] > 0
    # the ranks explored differently: own env seeds, own RNG streams
    assert not torch.equal(r0["rng"], r1["rng"])
    assert os.path.isdir(tmp_path / "ppo_root0") and not os.path.exists(tmp_path / "ppo_root1")
    files = _files(tmp_path / "ppo_root0")
    assert "config.gin" in files and "progress.csv" in files and "train/ckpt-0000000006.pt" in files
    # a single process run with the same config writes the same set of files
    ckpt = torch.load(tmp_path / "ppo_root0" / "train" / "ckpt-0000000006.pt", weights_only=True)
    assert ckpt["world_size"] == 2 and len(ckpt["ranks"]) == 2
    assert torch.equal(ckpt["ranks"][1]["rng"]["torch"], r1["rng"])
    with open(tmp_path / "ppo_root0" / "progress.csv") as f:
        rows = f.read().splitlines()
    assert rows[-1].split(",")[:2] == ["6", str(6 * 2 * 2 * 8)]


def test_sac_two_ranks_identical_and_resume_exact(tmp_path):
    conf = _write(tmp_path, "sac.gin", SAC)
    r0, r1 = _train(tmp_path, conf, "sac")
    _assert_identical(r0["state"], r1["state"], "SAC")
    assert r0["context"]["env_steps"] == 40 * 2 * 2
    assert r0["context"]["num_updates"] == r1["context"]["num_updates"] > 0
    # each rank's buffer holds its own envs' steps (different data, same shapes)
    b0, b1 = r0["replay_buffer"], r1["replay_buffer"]
    assert any(not torch.equal(x, y) for x, y in zip(_tensors(b0), _tensors(b1)))

    # resume: every rank gets the shared state and its own RNG stream and buffer back
    r0b, r1b = _train(tmp_path, conf, "sac", extra=["TrainerConfig.num_iterations=60"],
                      inspect=True)
    for before, after in ((r0, r0b), (r1, r1b)):
        _assert_identical(before["state"], after["restored"]["state"], "restored state")
        assert torch.equal(before["rng"], after["restored"]["rng"])
        assert after["restored"]["context"] == before["context"]
        for x, y in zip(_tensors(before["replay_buffer"]),
                        _tensors(after["restored"]["replay_buffer"])):
            assert torch.equal(x, y)
    _assert_identical(r0b["state"], r1b["state"], "SAC after resume")
    assert r0b["context"]["env_steps"] == 60 * 2 * 2
    assert not os.path.exists(tmp_path / "sac_root1")


def _tensors(nest):
    if isinstance(nest, torch.Tensor):
        return [nest]
    if isinstance(nest, dict):
        return [t for k in sorted(nest) for t in _tensors(nest[k])]
    if isinstance(nest, (list, tuple)):
        return [t for x in nest for t in _tensors(x)]
    return []


def test_hybrid_sac_two_ranks_each_with_its_offline_buffer(tmp_path):
    """Hybrid: every rank loads the dataset into its own offline buffer and mixes it with
    its own online rows; parameters stay identical."""
    from alf.datasets.format import DatasetSteps, DatasetWriter
    from alf.environments import create_environment
    env = create_environment(env_name="Pendulum-v1", num_parallel_environments=2, seed=3)
    try:
        with DatasetWriter(str(tmp_path / "data"), 2, 60, "Pendulum-v1", env.observation_spec(),
                           env.action_spec(), env.reward_spec()) as writer:
            ts = env.reset()
            for _ in range(60):
                action = env.action_spec().sample((2,))
                writer.append(DatasetSteps(step_type=ts.step_type[None], reward=ts.reward[None],
                                           discount=ts.discount[None],
                                           observation=ts.observation[None],
                                           action=action[None]))
                ts = env.step(action)
    finally:
        env.close()
    conf = _write(tmp_path, "hybrid.gin", SAC + f"""
TrainerConfig.offline_buffer_dir = '{tmp_path / "data"}'
TrainerConfig.offline_fraction = 0.5
TrainerConfig.initial_collect_steps = 0
TrainerConfig.num_iterations = 20
""")
    r0, r1 = _train(tmp_path, conf, "hybrid")
    _assert_identical(r0["state"], r1["state"], "hybrid SAC")
    assert r0["context"]["num_updates"] == 20 and r0["context"]["env_steps"] == 20 * 2 * 2
    assert not os.path.exists(tmp_path / "hybrid_root1")


# An Agent: PPO with an RND reward module (one value per column, running observation and
# bonus statistics) and a latent-dynamics representation learner (its own optimizer)
AGENT = PPO + """
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @PPOAlgorithm
Agent.reward_modules = [@RNDRewardModule]
Agent.reward_weights = [1.0, 0.5]
Agent.representation_learner_cls = @LatentDynamicsLearner
RNDRewardModule.fc_layer_params = (8,)
RNDRewardModule.feature_size = 4
RNDRewardModule.optimizer = @rnd/alf.optimizers.Adam()
LatentDynamicsLearner.fc_layer_params = (8,)
LatentDynamicsLearner.feature_size = 8
LatentDynamicsLearner.optimizer = @repr/alf.optimizers.Adam()
TrainerConfig.mini_batch_length = 2
"""


def test_agent_two_ranks_keep_every_part_identical(tmp_path):
    """Every part's parameters, optimizer-free buffers and running statistics (RND's
    observation and bonus statistics fold every rank's batch) stay bit-identical;
    the drift check (``distributed_drift='error'``) passes."""
    conf = _write(tmp_path, "agent.gin", AGENT)
    r0, r1 = _train(tmp_path, conf, "agent")
    _assert_identical(r0["state"], r1["state"], "Agent")
    stats = [k for k in r0["state"] if k.startswith("_reward_modules.0._obs_stats.")]
    assert stats and int(r0["state"]["_reward_modules.0._obs_stats.count"]) > 0
    assert any(k.startswith("_representation.encoder.") for k in r0["state"])
    assert r0["context"]["num_updates"] == r1["context"]["num_updates"] > 0
