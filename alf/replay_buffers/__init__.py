"""Replay buffers: ring storage, uniform and prioritized sampling, n-step transitions."""
from alf.replay_buffers.replay_buffer import ReplayBuffer  # noqa: F401
from alf.replay_buffers.sum_tree import SumTree  # noqa: F401
from alf.replay_buffers.n_step import Transition, make_transitions  # noqa: F401
