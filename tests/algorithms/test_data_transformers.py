"""Tests for alf.algorithms.data_transformers."""
import functools
import io
import pickle

import gin
import numpy as np
import pytest
import torch

from alf.algorithms.data_transformers import (
    DataTransformer, IdentityDataTransformer, ObservationNormalizer, RewardClipping,
    RewardNormalizer, RewardScaling, SequentialDataTransformer, create_data_transformer)
from alf.data_structures import StepType, TimeStep
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
OBS_SPEC = {"image": BoundedTensorSpec((2, 2), torch.uint8, 0, 255), "state": TensorSpec((3,))}


def make_ts(obs=(), reward=None, step_type=None, batch=2):
    reward = torch.zeros(batch) if reward is None else torch.as_tensor(reward, dtype=torch.float32)
    step_type = (torch.full((batch,), M, dtype=torch.int32) if step_type is None
                 else torch.as_tensor(step_type, dtype=torch.int32))
    return TimeStep(step_type=step_type, reward=reward, discount=torch.ones(batch),
                    observation=obs, env_id=torch.arange(batch))


def random_obs(g, batch=4):
    return {"image": torch.randint(0, 255, (batch, 2, 2), dtype=torch.uint8, generator=g),
            "state": torch.tensor([1., -2., 10.]) + torch.tensor([.5, 3., 20.]) * torch.randn(
                batch, 3, generator=g)}


def save_load(module, fresh):
    buf = io.BytesIO()
    torch.save(module.state_dict(), buf)
    buf.seek(0)
    fresh.load_state_dict(torch.load(buf))
    return fresh


def test_observation_normalizer_statistics_eval_and_checkpoint():
    norm = ObservationNormalizer(observation_spec=OBS_SPEC, clipping=5.0)
    assert norm.transformed_observation_spec == {"image": OBS_SPEC["image"],
                                                 "state": TensorSpec((3,), torch.float32)}
    assert norm.state_spec == ()
    g = torch.Generator().manual_seed(0)
    seen = []
    for _ in range(5):
        obs = random_obs(g)
        seen.append(obs["state"])
        out, state = norm.transform_timestep(make_ts(obs, batch=4), ())
        assert state == () and torch.equal(out.observation["image"], obs["image"])
    data = torch.cat(seen).double().numpy()
    stats = norm.normalizer.normalizers["state"]
    np.testing.assert_allclose(stats.mean.numpy(), data.mean(0), rtol=1e-9)
    np.testing.assert_allclose(stats.var.numpy(), data.var(0), rtol=1e-9)
    # the last output was normalised with statistics that already include it (SB3 order)
    expected = np.clip((seen[-1].double().numpy() - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), -5, 5)
    np.testing.assert_allclose(out.observation["state"].numpy(), expected, rtol=1e-5, atol=1e-6)

    # eval mode: no update
    norm.eval()
    before = {k: v.clone() for k, v in norm.state_dict().items()}
    obs = random_obs(g)
    y1, _ = norm.transform_timestep(make_ts(obs, batch=4), ())
    for k, v in norm.state_dict().items():
        assert torch.equal(v, before[k]), k

    # checkpoint round trip reproduces outputs
    fresh = save_load(norm, ObservationNormalizer(observation_spec=OBS_SPEC, clipping=5.0)).eval()
    y2, _ = fresh.transform_timestep(make_ts(obs, batch=4), ())
    torch.testing.assert_close(y2.observation["state"], y1.observation["state"])
    clone = pickle.loads(pickle.dumps(norm))
    y3, _ = clone.transform_timestep(make_ts(obs, batch=4), ())
    torch.testing.assert_close(y3.observation["state"], y1.observation["state"])


def test_observation_normalizer_clipping():
    norm = ObservationNormalizer(observation_spec=TensorSpec((1,)), clipping=1.0)
    norm.transform_timestep(make_ts(torch.tensor([[0.], [2.]])), ())  # mean 1, var 1
    norm.eval()
    out, _ = norm.transform_timestep(make_ts(torch.tensor([[1.5], [100.]])), ())
    torch.testing.assert_close(out.observation, torch.tensor([[0.5], [1.0]]), atol=1e-6, rtol=0)
    unclipped = ObservationNormalizer(observation_spec=TensorSpec((1,)), clipping=None)
    unclipped.load_state_dict(norm.state_dict())
    out, _ = unclipped.eval().transform_timestep(make_ts(torch.tensor([[100.]]), batch=1), ())
    torch.testing.assert_close(out.observation, torch.tensor([[99.]]))


def test_reward_scaling_and_clipping():
    ts = make_ts(reward=[-3., 0.5])
    out, _ = RewardScaling(observation_spec=(), scale=2.0).transform_timestep(ts, ())
    torch.testing.assert_close(out.reward, torch.tensor([-6., 1.]))
    out, _ = RewardClipping(observation_spec=()).transform_timestep(ts, ())
    torch.testing.assert_close(out.reward, torch.tensor([-1., 0.5]))
    out, _ = RewardClipping(observation_spec=(), minmax=(0., 0.2)).transform_timestep(ts, ())
    torch.testing.assert_close(out.reward, torch.tensor([0., 0.2]))
    with pytest.raises(ValueError):
        RewardClipping(observation_spec=(), minmax=(1, -1))


def test_reward_normalizer_constructed_sequence():
    rn = RewardNormalizer(observation_spec=(), gamma=0.5, clip_value=100.0, epsilon=0.0)
    assert rn.state_spec == TensorSpec(())
    state = rn.get_initial_state(2)
    # (step_types, rewards, expected running returns R = 0.5 R + r, reset at FIRST)
    steps = [([F, F], [0., 0.], [0., 0.]),
             ([M, M], [1., 2.], [1., 2.]),
             ([L, M], [3., -2.], [3.5, -1.]),     # .5*1 + 3, .5*2 - 2
             ([F, M], [0., 1.], [0., 0.5]),       # reset; .5*-1 + 1
             ([M, M], [4., 0.], [4., 0.25])]
    returns_seen = []  # FIRST-step returns are not statistics samples
    for st, r, expected_ret in steps:
        out, state = rn.transform_timestep(make_ts(reward=r, step_type=st), state)
        torch.testing.assert_close(state, torch.tensor(expected_ret))
        returns_seen += [R for s, R in zip(st, expected_ret) if s != F]
        std = np.std(returns_seen) if returns_seen else 1.0
        torch.testing.assert_close(out.reward, torch.tensor(r) / float(std))
    # explicit: after step 2 the samples are {1, 2, 3.5, -1}: mean 1.375, var 2.671875
    assert returns_seen[:4] == [1., 2., 3.5, -1.]
    np.testing.assert_allclose(np.var(returns_seen[:4]), 2.671875)
    np.testing.assert_allclose(rn.return_stats.var.item(), np.var(returns_seen))

    # eval: statistics frozen, running return still tracked
    rn.eval()
    before = rn.return_stats.var.clone()
    out, state = rn.transform_timestep(make_ts(reward=[1., 1.]), state)
    torch.testing.assert_close(state, torch.tensor([3., 1.125]))
    assert torch.equal(rn.return_stats.var, before)
    torch.testing.assert_close(out.reward, torch.ones(2) / float(np.std(returns_seen)))


def test_reward_normalizer_clip_and_update_max_calls_checkpointed():
    rn = RewardNormalizer(observation_spec=(), gamma=0.0, clip_value=1.5, update_max_calls=2)
    state = rn.get_initial_state(2)
    _, state = rn.transform_timestep(make_ts(reward=[1., 3.]), state)  # var 1
    out, state = rn.transform_timestep(make_ts(reward=[1., 3.]), state)
    torch.testing.assert_close(out.reward, torch.tensor([1., 1.5]))  # 1/1, 3/1 clipped
    var = rn.return_stats.var.clone()
    rn.transform_timestep(make_ts(reward=[100., -100.]), state)  # third call: no update
    assert torch.equal(rn.return_stats.var, var)
    fresh = save_load(rn, RewardNormalizer(observation_spec=(), gamma=0.0, clip_value=1.5,
                                           update_max_calls=2))
    fresh.transform_timestep(make_ts(reward=[100., -100.]), state)
    assert torch.equal(fresh.return_stats.var, var)


class CastImageToFloat(DataTransformer):
    """Test helper that changes the observation spec: uint8 image -> float32 in [0, 1]."""

    def __init__(self, observation_spec):
        super().__init__(observation_spec)
        self._transformed_observation_spec = dict(
            observation_spec, image=TensorSpec(observation_spec["image"].shape, torch.float32))

    def transform_timestep(self, time_step, state):
        obs = dict(time_step.observation, image=time_step.observation["image"].float() / 255)
        return time_step._replace(observation=obs), state


def test_sequential_threads_specs_state_and_order():
    seq = SequentialDataTransformer(
        [CastImageToFloat, ObservationNormalizer, RewardNormalizer,
         functools.partial(RewardScaling, scale=10.0), RewardClipping],
        observation_spec=OBS_SPEC)
    # ObservationNormalizer was built on the float image spec, so it normalises the image too
    assert set(seq.members[1].normalizer.normalizers.keys()) == {"image", "state"}
    assert seq.transformed_observation_spec == {"image": TensorSpec((2, 2)), "state": TensorSpec((3,))}
    assert seq.state_spec == ((), (), TensorSpec(()), (), ())
    state = seq.get_initial_state(2)
    g = torch.Generator().manual_seed(0)
    out, state = seq.transform_timestep(make_ts(random_obs(g, 2), reward=[0.05, -0.3]), state)
    # reward: normalised by var of returns {0.05, -0.3} (= 0.030625), *10, then clipped
    torch.testing.assert_close(out.reward, torch.tensor([1., -1.]))
    torch.testing.assert_close(state[2], torch.tensor([0.05, -0.3]))
    assert out.observation["image"].dtype == torch.float32
    # order matters: clipping before scaling gives a different result
    a = SequentialDataTransformer([RewardClipping, functools.partial(RewardScaling, scale=10.)], ())
    b = SequentialDataTransformer([functools.partial(RewardScaling, scale=10.), RewardClipping], ())
    ts = make_ts(reward=[0.5, -3.])
    torch.testing.assert_close(a.transform_timestep(ts, ((), ()))[0].reward, torch.tensor([5., -10.]))
    torch.testing.assert_close(b.transform_timestep(ts, ((), ()))[0].reward, torch.tensor([1., -1.]))
    with pytest.raises(ValueError, match="member states"):
        a.transform_timestep(ts, ())
    # statistics of members are in the sequential module's state_dict; pickling works
    assert any(k.startswith("members.2.return_stats") for k in seq.state_dict())
    clone = pickle.loads(pickle.dumps(seq))
    assert clone.state_spec == seq.state_spec


def test_create_data_transformer():
    ident = create_data_transformer(None, OBS_SPEC)
    assert isinstance(ident, IdentityDataTransformer)
    assert ident.transformed_observation_spec == OBS_SPEC
    ts = make_ts(reward=[1., 2.])
    assert ident.transform_timestep(ts, ())[0] is ts
    assert isinstance(create_data_transformer([], OBS_SPEC), IdentityDataTransformer)
    one = create_data_transformer(ObservationNormalizer, OBS_SPEC)
    assert isinstance(one, ObservationNormalizer)
    seq = create_data_transformer([ObservationNormalizer, RewardScaling], OBS_SPEC)
    assert isinstance(seq, SequentialDataTransformer) and len(seq.members) == 2
    with pytest.raises(TypeError):
        create_data_transformer(lambda observation_spec: object(), OBS_SPEC)


def test_gin_configurable():
    try:
        gin.clear_config()
        gin.parse_config("RewardScaling.scale = 3.0\n"
                         "RewardClipping.minmax = (-2.0, 2.0)")
        ctors = [gin.get_configurable("RewardScaling"), gin.get_configurable("RewardClipping")]
        t = create_data_transformer(ctors, ())
        out, _ = t.transform_timestep(make_ts(reward=[0.5, -1.]), t.get_initial_state(2))
        torch.testing.assert_close(out.reward, torch.tensor([1.5, -2.]))
    finally:
        gin.clear_config()


# ------------------------------------------------------- learner-owned statistics
def _stats_transformer(**reward_kwargs):
    reward_kwargs.setdefault("gamma", 0.9)
    return SequentialDataTransformer(
        [ObservationNormalizer, functools.partial(RewardScaling, scale=2.0),
         functools.partial(RewardNormalizer, **reward_kwargs)], observation_spec=OBS_SPEC)


def _stream(seed, steps=6, batch=3):
    """``steps`` batched TimeSteps of one env group; episodes start at step 0 and at random."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in range(steps):
        first = torch.rand(batch, generator=g) < 0.25 if t else torch.ones(batch, dtype=torch.bool)
        step_type = torch.where(first, torch.tensor(F), torch.tensor(M))
        out.append(make_ts(random_obs(g, batch), reward=torch.randn(batch, generator=g) * 3,
                           step_type=step_type, batch=batch))
    return out


def _run(transformer, stream):
    state, outs = transformer.get_initial_state(stream[0].reward.shape[0]), []
    for ts in stream:
        out, state = transformer.transform_timestep(ts, state)
        outs.append(out)
    return outs


def _copy_of(learner, **kwargs):
    """What an actor holds: a transformer built from the same config, given the learner's state."""
    copy = _stats_transformer(**kwargs)
    copy.load_state_dict(learner.state_dict())
    return copy


def _assert_same_statistics(a, b, tol=1e-12):
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb)
    for k in sa:
        if isinstance(sa[k], torch.Tensor):
            torch.testing.assert_close(sa[k], sb[k], rtol=tol, atol=tol, msg=k)
        else:
            assert sa[k] == sb[k], k


def test_frozen_actors_and_a_merging_learner_match_one_transformer_that_saw_everything():
    learner = _stats_transformer()
    _run(learner, _stream(100))  # the learner's statistics already hold some data
    initial = {k: v.clone() for k, v in learner.state_dict().items()
               if isinstance(v, torch.Tensor)}
    reference = _copy_of(learner)  # sees every actor's data itself
    shipped = _copy_of(learner).eval()  # normalises with the learner's statistics only
    actors = [_copy_of(learner) for _ in range(3)]
    for actor in actors:
        actor.freeze_statistics(True)
        assert actor.statistics_frozen and actor.members[2].statistics_frozen
    for i, actor in enumerate(actors):
        stream = _stream(i)
        outs = _run(actor, stream)
        _run(reference, stream)
        # the actor normalised with the learner's statistics, as an eval-mode copy does
        for got, want in zip(outs, _run(shipped, stream)):
            torch.testing.assert_close(got.observation["state"], want.observation["state"])
            torch.testing.assert_close(got.reward, want.reward)
        # and its own statistics did not move
        for k, v in actor.state_dict().items():
            if isinstance(v, torch.Tensor):
                assert torch.equal(v, initial[k]), k
        assert actor.members[2]._num_updates == learner.members[2]._num_updates
    for actor in actors:
        stats = actor.pop_statistics()
        assert sorted(stats) == ["0", "2"]  # RewardScaling has none
        assert sorted(stats["2"]) == ["calls", "return"] and int(stats["2"]["calls"]) == 6
        learner.merge_statistics(pickle.loads(pickle.dumps(stats)))  # it crosses a process
    _assert_same_statistics(learner, reference)
    assert learner.members[2]._num_updates == reference.members[2]._num_updates == 24
    # popped: a second pop is empty, and merging it changes nothing
    empty = actors[0].pop_statistics()
    assert empty["0"]["state"]["count"].item() == 0 and int(empty["2"]["calls"]) == 0
    learner.merge_statistics(empty)
    _assert_same_statistics(learner, reference)


def test_frozen_eval_mode_accumulates_nothing_and_unfreezing_updates_again():
    actor = _stats_transformer()
    actor.freeze_statistics()
    actor.eval()
    _run(actor, _stream(0))
    stats = actor.pop_statistics()
    assert stats["0"]["state"]["count"].item() == 0 and int(stats["2"]["calls"]) == 0
    actor.train()
    actor.freeze_statistics(False)
    _run(actor, _stream(0))
    assert actor.members[0].normalizer.normalizers["state"].count.item() == 18
    assert actor.members[2]._num_updates == 6


def test_reward_normalizer_update_max_calls_counts_merged_steps():
    def make():
        return RewardNormalizer(observation_spec=(), gamma=0.0, update_max_calls=4)
    stream = [make_ts(reward=[float(i), -2.0 * i + 1]) for i in range(1, 7)]
    sync = make()
    _run(sync, stream)  # updates on the first 4 calls only
    learner, actor = make(), make()
    actor.freeze_statistics()
    for i in range(0, 6, 2):  # the actor ships every 2 steps
        _run(actor, stream[i:i + 2])
        learner.merge_statistics(actor.pop_statistics())
    assert learner._num_updates == 4
    _assert_same_statistics(learner, sync)
    # a merge is taken whole: with pops of 3 steps the learner takes 6
    learner, actor = make(), make()
    actor.freeze_statistics()
    for i in (0, 3):
        _run(actor, stream[i:i + 3])
        learner.merge_statistics(actor.pop_statistics())
    assert learner._num_updates == 6
    all_six = RewardNormalizer(observation_spec=(), gamma=0.0)
    _run(all_six, stream)
    torch.testing.assert_close(learner.return_stats.var, all_six.return_stats.var,
                               rtol=1e-12, atol=1e-12)


def test_transformers_without_statistics_and_mismatched_statistics():
    ident = IdentityDataTransformer(OBS_SPEC)
    ident.freeze_statistics()
    assert ident.pop_statistics() == {}
    ident.merge_statistics({})
    with pytest.raises(ValueError, match="IdentityDataTransformer has no statistics"):
        ident.merge_statistics({"0": {}})
    seq = SequentialDataTransformer([RewardScaling, RewardClipping], ())
    assert seq.pop_statistics() == {}
    with pytest.raises(ValueError, match=r"no members \['5'\]"):
        seq.merge_statistics({"5": {}})
    with pytest.raises(ValueError, match="expects keys"):
        RewardNormalizer(observation_spec=()).merge_statistics({"return": {}})
