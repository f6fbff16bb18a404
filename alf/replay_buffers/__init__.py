"""Replay buffers: ring storage, sampling and (later) priorities and offline datasets."""
from alf.replay_buffers.replay_buffer import ReplayBuffer  # noqa: F401
