"""FrameStacker: rollout stacking across episode boundaries, and replay buffers that store
each frame once yet return exactly the stacked observations the algorithm saw."""
import collections

import pytest
import torch

from alf import nest
from alf.algorithms.data_transformers import (RewardClipping, ObservationNormalizer,
                                              SequentialDataTransformer)
from alf.algorithms.frame_stacker import FrameStacker, find_frame_stacker
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import ConfigError
from alf.replay_buffers import ReplayBuffer
from alf.replay_buffers.experience_storage import (gather_all_positions, restore_derived_fields,
                                                   storage_spec, to_storage)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec, extract_spec

FIRST, MID, LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
FRAME = BoundedTensorSpec((1, 3, 2), torch.uint8, 0, 255)


def _step_types(num_envs: int, steps: int, seed: int = 0) -> torch.Tensor:
    """[T, B] step types: random episode lengths 1..6 (LAST then FIRST)."""
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(steps, num_envs, dtype=torch.int32)
    for b in range(num_envs):
        t = 0
        out[0, b] = FIRST
        remaining = int(torch.randint(1, 7, (), generator=gen))
        for t in range(1, steps):
            prev = int(out[t - 1, b])
            if prev == LAST:
                out[t, b] = FIRST
                remaining = int(torch.randint(1, 7, (), generator=gen))
            elif remaining == 0:
                out[t, b] = LAST
            else:
                out[t, b] = MID
                remaining -= 1
    return out


def _frames(num_envs: int, steps: int) -> torch.Tensor:
    """[T, B, 1, 3, 2] uint8 frames whose pixels encode (t, env)."""
    t = torch.arange(steps)[:, None, None, None, None]
    b = torch.arange(num_envs)[None, :, None, None, None]
    pix = torch.arange(6).reshape(1, 1, 1, 3, 2)
    return ((t * 7 + b * 3 + pix) % 251).to(torch.uint8)


def _reference_stack(frames: torch.Tensor, step_types: torch.Tensor, k: int) -> torch.Tensor:
    """Naive per-env deque: at FIRST fill with the first frame. [T, B, k, 3, 2]."""
    T, B = step_types.shape
    out = torch.empty((T, B, k) + tuple(frames.shape[3:]), dtype=frames.dtype)
    for b in range(B):
        window = collections.deque(maxlen=k)
        for t in range(T):
            if int(step_types[t, b]) == FIRST:
                window.extend([frames[t, b, 0]] * k)
            else:
                window.append(frames[t, b, 0])
            out[t, b] = torch.stack(list(window))
    return out


def _rollout(stacker: FrameStacker, frames, step_types):
    """Run the stacker over [T, B] time steps; returns the stacked observations [T, B, ...]."""
    T, B = step_types.shape
    state = stacker.get_initial_state(B)
    outs = []
    for t in range(T):
        ts = TimeStep(step_type=step_types[t], reward=torch.zeros(B), discount=torch.ones(B),
                      observation=frames[t], prev_action=torch.zeros(B, dtype=torch.int64),
                      env_id=torch.arange(B), env_info={})
        ts, state = stacker.transform_timestep(ts, state)
        outs.append(ts)
    return nest.stack(outs)


def test_specs_and_state():
    stacker = FrameStacker(observation_spec=FRAME, stack_size=4)
    out = stacker.transformed_observation_spec
    assert tuple(out.shape) == (4, 3, 2) and out.dtype == torch.uint8
    assert out.minimum.min() == 0 and out.maximum.max() == 255
    assert tuple(stacker.state_spec[0].shape) == (3, 3, 2)
    assert stacker.history_length == 3 and stacker.stack_size == 4
    # another axis, and a nest with one stacked field
    spec = {"image": FRAME, "vec": TensorSpec((5,))}
    s2 = FrameStacker(observation_spec=spec, stack_size=3, stack_axis=-1, fields=["image"])
    assert tuple(s2.transformed_observation_spec["image"].shape) == (1, 3, 6)
    assert s2.transformed_observation_spec["vec"] == spec["vec"]


def test_rollout_stacking_matches_reference_across_episode_boundaries():
    T, B, k = 40, 3, 4
    frames, st = _frames(B, T), _step_types(B, T)
    stacked = _rollout(FrameStacker(observation_spec=FRAME, stack_size=k), frames, st).observation
    assert stacked.shape == (T, B, k, 3, 2)
    assert torch.equal(stacked, _reference_stack(frames, st, k))


def test_stack_axis_other_than_channels():
    T, B, k = 12, 2, 3
    frames, st = _frames(B, T), _step_types(B, T, seed=3)
    stacker = FrameStacker(observation_spec=FRAME, stack_size=k, stack_axis=2)
    out = _rollout(stacker, frames, st).observation  # [T, B, 1, 3, 2k]
    ref = _reference_stack(frames, st, k)  # [T, B, k, 3, 2]
    assert torch.equal(out, torch.cat(ref.unbind(2), dim=-1)[:, :, None])


def _store(stacker, frames, st, capacity: int, chunk: int = 5):
    """Rollout through the stacker and write each chunk to a buffer as the algorithm does."""
    T, B = st.shape
    seen = _rollout(stacker, frames, st)
    action = torch.arange(T * B, dtype=torch.int64).reshape(T, B)
    exp = Experience(time_step=seen, action=action)
    buf = ReplayBuffer(storage_spec(extract_spec(exp, 2), stacker), B, capacity)
    for t0 in range(0, T, chunk):
        part = nest.map_structure(lambda x: x[t0:t0 + chunk], exp)
        buf.add_sequence(to_storage(part, stacker), part.time_step.env_id[0])
    return buf, seen


def test_buffer_stores_one_frame_per_step():
    stacker = FrameStacker(observation_spec=FRAME, stack_size=4)
    buf, _ = _store(stacker, _frames(2, 10), _step_types(2, 10), capacity=16)
    assert tuple(buf.data_spec.time_step.observation.shape) == (1, 3, 2)


@pytest.mark.parametrize("capacity", [64, 13])
def test_sampled_sequences_equal_what_the_algorithm_saw(capacity):
    T, B, k, L = 60, 3, 4, 3
    stacker = FrameStacker(observation_spec=FRAME, stack_size=k)
    frames, st = _frames(B, T), _step_types(B, T, seed=1)
    buf, seen = _store(stacker, frames, st, capacity)
    head = buf.current_pos()
    checked = approximated = 0
    for b in range(B):
        oldest = int(head[b]) - int(buf.current_size()[b])
        for p in range(oldest, int(head[b]) - L + 1):
            env_ids, positions = torch.tensor([b]), torch.tensor([p])
            data = buf.get_by_position(env_ids, positions, L)
            out = restore_derived_fields(buf, data, env_ids, positions, TensorSpec((), torch.int64),
                                         frame_stacker=stacker)
            got = out.time_step.observation[0]  # [L, k, 3, 2]
            want = seen.observation[p:p + L, b]
            # exact unless the sequence starts within k-1 steps of the oldest step mid-episode
            history_overwritten = p - (k - 1) < max(0, int(head[b]) - capacity)
            episode_started = any(int(st[q, b]) == FIRST for q in range(max(0, p - k + 2), p + 1))
            if not history_overwritten or episode_started or p < k - 1:
                assert torch.equal(got, want), (b, p)
                checked += 1
            else:  # frames from before the oldest stored step become the oldest one
                oldest_present = int(head[b]) - capacity
                src = [max(p - lag, oldest_present) for lag in range(k - 1, -1, -1)]
                assert torch.equal(got[0], frames[src, b, 0]), (b, p)
                approximated += 1
    assert checked > 20
    assert approximated > 0 if capacity < T else approximated == 0


def test_gather_all_after_clear_keeps_history_exact():
    """Whole-buffer training (PPO): the ring keeps k-1 slots of history before the kept step."""
    T, B, k, unroll = 40, 2, 4, 8
    stacker = FrameStacker(observation_spec=FRAME, stack_size=k)
    frames, st = _frames(B, T), _step_types(B, T, seed=2)
    seen = _rollout(stacker, frames, st)
    exp = Experience(time_step=seen, action=torch.zeros(T, B, dtype=torch.int64))
    capacity = unroll + 1 + (k - 1)  # what RLAlgorithm allocates for whole-buffer training
    buf = ReplayBuffer(storage_spec(extract_spec(exp, 2), stacker), B, capacity)
    for t0 in range(0, T, unroll):
        part = nest.map_structure(lambda x: x[t0:t0 + unroll], exp)
        buf.add_sequence(to_storage(part, stacker), part.time_step.env_id[0])
        data = buf.gather_all()
        env_ids, positions = gather_all_positions(buf)
        out = restore_derived_fields(buf, data, env_ids, positions, TensorSpec((), torch.int64),
                                     frame_stacker=stacker)
        n = data.action.shape[1]
        start = t0 + unroll - n
        want = seen.observation[start:t0 + unroll].transpose(0, 1)
        assert torch.equal(out.time_step.observation, want), t0
        buf.clear(keep_last=True)


def test_observation_transformers_must_precede_the_stacker():
    spec = TensorSpec((4,))
    with pytest.raises(ConfigError, match="comes after a FrameStacker"):
        SequentialDataTransformer([FrameStacker, ObservationNormalizer], observation_spec=spec)
    seq = SequentialDataTransformer([ObservationNormalizer, FrameStacker, RewardClipping],
                                    observation_spec=spec)
    assert isinstance(find_frame_stacker(seq), FrameStacker)
    assert tuple(seq.transformed_observation_spec.shape) == (16,)


def test_bad_arguments_name_the_problem():
    with pytest.raises(ConfigError, match="stack_size must be >= 1"):
        FrameStacker(observation_spec=FRAME, stack_size=0)
    with pytest.raises(ConfigError, match="stack_axis=3"):
        FrameStacker(observation_spec=FRAME, stack_axis=3)
    with pytest.raises(ConfigError, match=r"fields \['image'\] not found"):
        FrameStacker(observation_spec=FRAME, fields=["image"])


@pytest.mark.parametrize("algorithm", ["DqnAlgorithm", "PPOAlgorithm"])
def test_trainer_replays_exactly_the_stacked_observations_it_rolled_out(make_trainer, tmp_path,
                                                                        algorithm):
    """CartPole's [4] observations stacked to [16]: the buffer stores [4] per step, and every
    sampled (DQN) or gathered (PPO) sequence equals what ``rollout_step`` received."""
    conf = f"""
    create_environment.env_name = "CartPole-v1"
    create_environment.num_parallel_environments = 2
    create_environment.max_episode_steps = 7
    QNetwork.fc_layer_params = (8,)
    ActorDistributionNetwork.fc_layer_params = (8,)
    ValueNetwork.fc_layer_params = (8,)
    FrameStacker.stack_size = 3
    TrainerConfig.data_transformer_ctor = [@FrameStacker, @RewardClipping]
    TrainerConfig.algorithm_ctor = @{algorithm}
    TrainerConfig.unroll_length = 4
    TrainerConfig.mini_batch_size = 4
    TrainerConfig.num_updates_per_train_iter = 1
    TrainerConfig.num_iterations = 1
    TrainerConfig.evaluate = False
    TrainerConfig.progress_interval_seconds = 0.0
    """
    if algorithm == "DqnAlgorithm":
        conf += "TrainerConfig.replay_buffer_length = 100\nTrainerConfig.initial_collect_steps = 8\n"
    trainer = make_trainer(tmp_path / "fs", conf)
    alg, learner = trainer.algorithm, trainer.learner
    learner.prepare()
    assert tuple(learner.replay_buffer.data_spec.time_step.observation.shape) == (4,)
    assert tuple(alg.observation_spec.shape) == (12,)
    seen = []  # [T] of [B, 12]
    rollout_step = alg.rollout_step

    def recording_rollout_step(time_step, state):
        seen.append(time_step.observation.clone())
        return rollout_step(time_step, state)

    alg.rollout_step = recording_rollout_step
    for _ in range(6):
        with torch.no_grad():
            learner.collect(4)
        truth = torch.stack(seen)  # [T, B, 12]
        if algorithm == "DqnAlgorithm":
            data = learner.replay.sample(16, 2)
            pos, env = data.batch_info.positions, data.batch_info.env_ids
            want = torch.stack([truth[p:p + 2, b] for p, b in zip(pos.tolist(), env.tolist())])
        else:
            data = learner.replay.gather()
            env, pos = gather_all_positions(learner.replay_buffer)
            n = data.action.shape[1]
            want = torch.stack([truth[p:p + n, b] for p, b in zip(pos.tolist(), env.tolist())])
            learner.replay_buffer.clear(keep_last=True)
        assert torch.equal(data.time_step.observation, want)
    assert len(seen) == 24  # 6 unrolls of 4 steps, crossing several 7-step episodes


def test_atari_replay_returns_the_stacked_frames_the_agent_saw(make_trainer, tmp_path):
    """dqn_atari.gin on Breakout (ale-py's vector env): the buffer stores [1, 84, 84] per step,
    sampled [B, 2] sequences are the [4, 84, 84] stacks the agent was given, across resets."""
    pytest.importorskip("ale_py")
    conf = """
    include 'dqn_atari.gin'
    create_environment.env_name = "ALE/Breakout-v5"
    create_environment.num_parallel_environments = 2
    create_environment.max_episode_steps = 30
    NatureCnnEncoder.conv_layer_params = ((4, 8, 8),)
    NatureCnnEncoder.fc_layer_params = (8,)
    TrainerConfig.replay_buffer_length = 200
    TrainerConfig.num_iterations = 1
    TrainerConfig.num_threads = 1
    """
    trainer = make_trainer(tmp_path / "breakout", conf)
    alg, learner = trainer.algorithm, trainer.learner
    learner.prepare()
    assert tuple(learner.replay_buffer.data_spec.time_step.observation.shape) == (1, 84, 84)
    assert tuple(alg.observation_spec.shape) == (4, 84, 84)
    seen, steps = [], []
    rollout_step = alg.rollout_step

    def recording_rollout_step(time_step, state):
        seen.append(time_step.observation.clone())
        steps.append(time_step.step_type.clone())
        return rollout_step(time_step, state)

    alg.rollout_step = recording_rollout_step
    with torch.no_grad():
        learner.collect(70)  # episodes truncated at 30 steps: two resets per env
    truth = torch.stack(seen)
    assert int((torch.stack(steps) == FIRST).sum()) >= 4
    assert truth[1:].float().std() > 0  # real, changing frames
    data = learner.replay.sample(64, 2)
    pos, env = data.batch_info.positions.tolist(), data.batch_info.env_ids.tolist()
    want = torch.stack([truth[p:p + 2, b] for p, b in zip(pos, env)])
    assert torch.equal(data.time_step.observation, want)
