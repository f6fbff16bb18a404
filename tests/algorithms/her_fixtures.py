"""A replay buffer of goal-dict experience with known episodes, for the HER tests.

Row 0 holds (positions 0-9): an episode F M M L (0-3), one F M L (4-6) and one running
F M M (7-9). Row 1 holds one running episode F M M M M M M M M M (0-9). Every step's
``achieved_goal`` is ``[100 * row + position, 0]`` (so a relabeled goal names the step
it came from) and its ``desired_goal`` is ``[-1 - episode, 0]``.
"""
import torch

from alf.data_structures import Experience, StepType, TimeStep
from alf.replay_buffers import ReplayBuffer
from alf.tensor_specs import TensorSpec

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
ROW0 = [F, M, M, L, F, M, L, F, M, M]
EPISODE0 = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
ROW1 = [F] + [M] * 9
#: the last stored step of each position's episode, per row
ENDS = [[3, 3, 3, 3, 6, 6, 6, 9, 9, 9], [9] * 10]
GOAL = TensorSpec((2,))
OBS_SPEC = {"observation": TensorSpec((3,)), "achieved_goal": GOAL, "desired_goal": GOAL}


def spec() -> Experience:
    return Experience(time_step=TimeStep(
        step_type=TensorSpec((), torch.int32), reward=TensorSpec(()),
        discount=TensorSpec(()), observation=OBS_SPEC, env_info={}),
        action=TensorSpec((), torch.int64))


def filled_buffer(capacity: int = 10) -> ReplayBuffer:
    """The two rows above, ``[2 envs, 10 steps]`` (overwriting older ones if smaller)."""
    T = 10
    step_type = torch.tensor([ROW0, ROW1], dtype=torch.int32).T  # [T, 2]
    pos = torch.arange(T, dtype=torch.float32)
    achieved = torch.stack([torch.stack([pos, pos + 100]), torch.zeros(2, T)], -1)  # [2,T,2]
    episode = torch.tensor([EPISODE0, [0] * T], dtype=torch.float32)
    desired = torch.stack([-1 - episode, torch.zeros(2, T)], -1)
    obs = {"observation": torch.zeros(T, 2, 3), "achieved_goal": achieved.transpose(0, 1),
           "desired_goal": desired.transpose(0, 1)}
    reward = -(obs["achieved_goal"] != obs["desired_goal"]).any(-1).float()
    exp = Experience(time_step=TimeStep(step_type=step_type, reward=reward,
                                        discount=torch.ones(T, 2), observation=obs,
                                        env_info={}),
                     action=torch.zeros(T, 2, dtype=torch.int64))
    buffer = ReplayBuffer(spec(), num_envs=2, max_length=capacity)
    for t in range(T):  # one step at a time, as unrolls add them
        buffer.add_batch(Experience(*[_step(x, t) for x in exp]))
    return buffer


def _step(nest, t):
    from alf import nest as alf_nest
    return alf_nest.map_structure(lambda x: x[t], nest)


def goal_reward(achieved: torch.Tensor, desired: torch.Tensor, info=()) -> torch.Tensor:
    """0 where the goals are equal, else -1 (``[N, G] -> [N]``)."""
    return -(achieved != desired).any(-1).float()
