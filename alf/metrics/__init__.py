"""Metrics computed on the raw environment stream (returns, lengths)."""
from alf.metrics.episode_metrics import EpisodeMetrics  # noqa: F401
