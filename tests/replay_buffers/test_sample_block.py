"""SampleBlock and the Learner's ReplaySource.sample: a training iteration's mini-batches
come from one uniform get_batch, in order, with matching BatchInfo; new data, prioritized
buffers and the memory cap are respected."""
import pytest
import torch

from alf.data_structures import BatchInfo, Experience, StepType, TimeStep
from alf.replay_buffers.sample_block import SampleBlock, block_batches

DQN = """
create_environment.env_name = "CartPole-v1"
create_environment.num_parallel_environments = 2
QNetwork.fc_layer_params = (8,)
TrainerConfig.algorithm_ctor = @DqnAlgorithm
TrainerConfig.random_seed = 3
TrainerConfig.num_iterations = 1
TrainerConfig.unroll_length = 16
TrainerConfig.initial_collect_steps = 1000000
TrainerConfig.num_updates_per_train_iter = 5
TrainerConfig.mini_batch_size = 4
TrainerConfig.replay_buffer_length = 100
TrainerConfig.evaluate = False
TrainerConfig.num_threads = 1
"""


def _experience(n: int, length: int = 2) -> Experience:
    rows = torch.arange(n, dtype=torch.float32)[:, None] * 10 + torch.arange(length)[None, :]
    ts = TimeStep(step_type=torch.full((n, length), int(StepType.MID), dtype=torch.int32),
                  reward=rows, discount=torch.ones(n, length), observation={"o": rows[..., None]},
                  prev_action=torch.zeros(n, length, dtype=torch.int64),
                  env_id=torch.zeros(n, length, dtype=torch.int64), env_info={})
    return Experience(time_step=ts, action=rows.long(), rollout_info=(), state=(),
                      batch_info=BatchInfo(env_ids=torch.arange(n) % 3, positions=torch.arange(n),
                                           importance_weights=torch.ones(n), replay_buffer="rb"))


def test_sample_block_hands_out_consecutive_slices_then_none():
    block = SampleBlock(_experience(12), batch_size=4)
    assert (block.batch_size, block.length, block.remaining) == (4, 2, 3)
    for i in range(3):
        batch = block.next_batch()
        rows = torch.arange(4 * i, 4 * i + 4)
        assert torch.equal(batch.time_step.reward[:, 0], rows.float() * 10)
        assert torch.equal(batch.time_step.observation["o"][:, 1, 0], rows.float() * 10 + 1)
        assert torch.equal(batch.action[:, 1], rows * 10 + 1)
        info = batch.batch_info
        assert torch.equal(info.positions, rows) and torch.equal(info.env_ids, rows % 3)
        assert info.importance_weights.shape == (4,) and info.replay_buffer == "rb"
        assert batch.rollout_info == () and batch.time_step.env_info == {}
    assert block.remaining == 0 and block.next_batch() is None


def test_block_batches_caps_the_block_by_bytes():
    assert block_batches(128, 64, 2, row_bytes=40, max_bytes=1 << 20) == 128
    assert block_batches(128, 64, 2, row_bytes=40, max_bytes=40 * 2 * 64 * 10) == 10
    assert block_batches(128, 64, 2, row_bytes=10 ** 9, max_bytes=1) == 1
    assert block_batches(1, 64, 2, row_bytes=4, max_bytes=1 << 30) == 1


def _filled_dqn(make_trainer, tmp_path, params=()):
    """The Learner of a DQN trainer, its buffer holding 16 steps of each of 2 envs."""
    trainer = make_trainer(tmp_path / "run", DQN, list(params))
    learner = trainer.learner
    learner.prepare()
    with torch.no_grad():
        learner.collect(16)
    return learner


def _count_get_batch(rb):
    calls = []
    original = rb.get_batch

    def counting(batch_size, batch_length=1, **kwargs):
        calls.append(batch_size)
        return original(batch_size, batch_length, **kwargs)

    rb.get_batch = counting
    return calls


def test_uniform_sampling_draws_one_block_per_iteration(make_trainer, tmp_path):
    learner = _filled_dqn(make_trainer, tmp_path)
    rb = learner.replay_buffer
    calls = _count_get_batch(rb)
    obs = rb._storage.time_step.observation  # [envs, capacity, 4]
    batches = [learner.replay.sample(4, 2) for _ in range(5)]
    assert calls == [20]  # K = num_updates_per_train_iter = 5 batches of 4, one draw
    for batch in batches:
        info = batch.batch_info
        assert batch.time_step.step_type.shape == (4, 2) and info.positions.shape == (4,)
        assert info.replay_buffer is rb and torch.equal(info.importance_weights, torch.ones(4))
        # every row is the stored sequence its BatchInfo names
        want = torch.stack([obs[e, p:p + 2] for e, p in zip(info.env_ids.tolist(),
                                                              info.positions.tolist())])
        assert torch.equal(batch.time_step.observation, want)
        assert torch.equal(batch.time_step.env_id, info.env_ids[:, None].expand(4, 2))
    learner.replay.sample(4, 2)  # the block is used up: a new one (4 batches left in it)
    assert calls == [20, 20]
    # a training iteration's 5 updates take the 4 left, then 1 of a new block ...
    learner.train_from_replay()
    assert calls == [20, 20, 20]
    learner.replay.sample(4, 2)  # ... which is not kept across iterations
    assert calls == [20, 20, 20, 20]
    learner.replay.sample(8, 2)  # another shape: another block
    assert calls == [20, 20, 20, 20, 40]


def test_new_data_drops_the_block(make_trainer, tmp_path):
    learner = _filled_dqn(make_trainer, tmp_path)
    calls = _count_get_batch(learner.replay_buffer)
    learner.replay.sample(4, 2)
    with torch.no_grad():
        learner.collect(16)  # replay.add: the sampled sequences may now be stale
    learner.replay.sample(4, 2)
    assert calls == [20, 20]
    learner.replay.drop_sample_blocks()
    learner.replay.sample(4, 2)
    assert calls == [20, 20, 20]


def test_prioritized_buffers_sample_every_batch(make_trainer, tmp_path):
    learner = _filled_dqn(make_trainer, tmp_path, ["TrainerConfig.priority_replay=True"])
    calls = _count_get_batch(learner.replay_buffer)
    for _ in range(3):
        learner.replay.sample(4, 2)
    assert calls == [4, 4, 4]


def test_training_iteration_uses_one_draw(make_trainer, tmp_path):
    learner = _filled_dqn(make_trainer, tmp_path)
    calls = _count_get_batch(learner.replay_buffer)
    before = learner.context.num_updates
    learner.train_from_replay()
    assert learner.context.num_updates - before == 5 and calls == [20]
    learner.train_from_replay()
    assert calls == [20, 20]


def test_block_draws_are_uniform_over_valid_starts(make_trainer, tmp_path):
    learner = _filled_dqn(make_trainer, tmp_path)  # 2 envs x 16 steps: 2 x 15 valid starts
    torch.manual_seed(0)
    counts = torch.zeros(2, 16)
    for _ in range(400):
        info = learner.replay.sample(4, 2).batch_info
        counts.index_put_((info.env_ids, info.positions), torch.ones(4), accumulate=True)
    assert counts[:, 15].sum() == 0  # a sequence never runs past the newest step
    expected = 1600 / 30
    assert ((counts[:, :15] - expected).abs() < 5 * expected ** 0.5).all()
