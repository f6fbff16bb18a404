"""The one build function of an experiment: data transformer + algorithm from env specs.

The Trainer, ``alf.bin.play`` and every async env worker build the same
experiment from the same parsed config (a worker re-parses the run's config
text, whose ``TrainerConfig.random_seed`` is the resolved seed), so they
cannot drift apart: they differ only in the env they build around it and in
the ``role`` the algorithm is built for.

Roles:
    ``"learner"``: trains (the :class:`~alf.trainers.learner.Learner` around it reads
        the training settings), on ``TrainerConfig.device``.
    ``"actor"``: an async env worker's rollout copy, on the CPU; never trains.
    ``"policy"``: a policy worker's rollout copy (batched inference for many env workers),
        on ``TrainerConfig.device``; never trains.
    ``"player"``: ``alf.bin.play``/evaluation, on the CPU, in eval mode.

An algorithm is built from specs alone. One written before the Learner existed
may still take ``config`` (and ``env``) in its constructor: it gets the
TrainerConfig (learner and actor roles) and ``env=None``.
"""
import inspect
from typing import Any, Optional


from alf.algorithms.data_transformers import create_data_transformer
from alf.environments.env_specs import EnvSpecs  # noqa: F401 - the experiment's spec type, re-exported
from alf.errors import ConfigError
from alf.utils.run_context import RunContext

ROLES = ("learner", "actor", "policy", "player")


def build_algorithm(config: Any, specs: EnvSpecs, role: str = "learner",
                    context: Optional[RunContext] = None) -> Any:
    """Build ``config.algorithm_ctor`` with its data transformer, on ``config.device``.

    Args:
        config: the parsed :class:`alf.trainers.trainer_config.TrainerConfig`.
        specs: the raw env's specs (before the data transformer).
        role: ``"learner"``, ``"actor"``, ``"policy"`` or ``"player"`` (see the module
            docstring).
        context: the run context (a fresh one if None).
    Returns:
        the algorithm, its transformer set (its Learner builds optimizers and buffers).
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    transformer = create_data_transformer(config.data_transformer_ctor, specs.observation_spec)
    legacy = {}
    if _takes(config.algorithm_ctor, "config"):
        legacy["config"] = None if role == "player" else config
    algorithm = config.algorithm_ctor(
        observation_spec=transformer.transformed_observation_spec,
        action_spec=specs.action_spec, reward_spec=specs.reward_spec,
        context=context if context is not None else RunContext(
            config.num_iterations, config.num_env_steps, summary_interval=config.summary_interval,
            summarize_first_interval=config.summarize_first_interval), **legacy)
    algorithm.set_data_transformer(transformer)
    # actors/players act on the CPU; policy workers batch inference on the learner's device
    device = config.device if role in ("learner", "policy") else "cpu"
    try:
        algorithm.to(device)
    except (RuntimeError, AssertionError) as e:
        raise ConfigError(f"TrainerConfig.device='{device}': {e}") from None
    if role == "player":
        algorithm.eval()
    return algorithm


def _takes(ctor: Any, name: str) -> bool:
    """Whether ``ctor`` has a parameter ``name`` (an algorithm written before the Learner
    took ``config``)."""
    try:
        return name in inspect.signature(ctor).parameters
    except (TypeError, ValueError):
        return False
