"""Trajectory slots and the weight channel: what workers and the learner exchange."""
import torch

from alf.data_structures import Experience, TimeStep
from alf.tensor_specs import TensorSpec
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.unrollers.weight_channel import WeightChannel


def _spec() -> Experience:
    ts = TimeStep(step_type=TensorSpec((), torch.int32), reward=TensorSpec(()),
                  discount=TensorSpec(()), observation=TensorSpec((2, 3), torch.uint8),
                  prev_action=TensorSpec((), torch.int64), env_id=TensorSpec((), torch.int64),
                  env_info={})
    return Experience(time_step=ts, action=TensorSpec((), torch.int64),
                      rollout_info={"log_prob": TensorSpec(())}, state=())


def _step(value: int, batch: int = 4) -> Experience:
    ts = TimeStep(step_type=torch.full((batch,), value % 3, dtype=torch.int32),
                  reward=torch.full((batch,), float(value)), discount=torch.ones(batch),
                  observation=torch.full((batch, 2, 3), value, dtype=torch.uint8),
                  prev_action=torch.zeros(batch, dtype=torch.int64),
                  env_id=torch.arange(batch) + 8, env_info={})
    return Experience(time_step=ts, action=torch.full((batch,), value, dtype=torch.int64),
                      rollout_info={"log_prob": torch.full((batch,), -float(value))}, state=())


def test_slots_are_spec_shaped_shared_and_read_as_private_copies():
    slots = TrajectorySlots(_spec(), num_slots=2, length=3, batch_size=4, shared=True)
    assert slots.buffers.time_step.observation.shape == (2, 3, 4, 2, 3)
    assert slots.buffers.time_step.observation.dtype == torch.uint8
    assert all(t.is_shared() for t in (slots.buffers.action, slots.buffers.time_step.reward))
    # every leaf is a view of one block: one shared storage, one file descriptor
    ptrs = {t.untyped_storage().data_ptr() for t in (slots.buffers.action,
                                                     slots.buffers.time_step.observation)}
    assert len(ptrs) == 1
    for t in range(3):
        slots.write_step(1, t, _step(10 + t))
    slots.copy_step(1, 2, 0, 0)  # the bootstrap step starts the next trajectory
    traj = slots.read(1)
    assert traj.action[:, 0].tolist() == [10, 11, 12]
    assert traj.rollout_info["log_prob"][:, 0].tolist() == [-10.0, -11.0, -12.0]
    assert traj.time_step.env_id[0].tolist() == [8, 9, 10, 11]
    assert slots.read(0).time_step.observation[0].unique().tolist() == [12]
    slots.write_step(1, 0, _step(99))
    assert traj.action[0, 0].item() == 10  # the copy read before is not affected
    assert slots.nbytes >= 2 * 3 * 4 * (4 + 4 + 4 + 6 + 8 + 8 + 8 + 4)


def test_weight_channel_serves_the_newest_or_an_exact_version():
    template = {"w": torch.zeros(3), "count": torch.zeros((), dtype=torch.float64)}
    channel = WeightChannel(template, shared=True)
    got = {}

    def load(state):
        got.update({k: v.clone() for k, v in state.items()})

    assert channel.latest_version() == -1 and channel.read(load) is None
    channel.publish({"w": torch.ones(3), "count": torch.tensor(5.0, dtype=torch.float64)},
                    version=4, counters=(5, 1000, 40))
    channel.publish({"w": torch.full((3,), 2.0), "count": torch.tensor(6.0,
                                                                        dtype=torch.float64)},
                    version=5, counters=(6, 1200, 48))
    assert channel.read(load) == (5, (6, 1200, 48)) and got["w"].tolist() == [2.0] * 3
    assert channel.read(load, version=4) == (4, (5, 1000, 40)) and got["w"].tolist() == [1.0] * 3
    assert got["count"].dtype == torch.float64 and got["count"].item() == 5.0
    channel.publish({"w": torch.full((3,), 3.0), "count": torch.tensor(7.0,
                                                                        dtype=torch.float64)},
                    version=6, counters=(7, 1400, 56))
    assert channel.read(load, version=4) is None  # overwritten: two buffers only
    assert channel.latest_version() == 6
