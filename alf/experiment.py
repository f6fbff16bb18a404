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
    ``"player"``: ``alf.bin.play``/evaluation/dataset collection, on the CPU, in eval mode,
        built with ``is_eval=True`` (an evaluation-only build: no critics, value or target
        networks, no optimizers; docs/design/eval_builds.md). A training checkpoint loads
        into it through :func:`checkpoint_state_for`.

``is_eval`` is passed only to an ``algorithm_ctor`` that declares it (like ``config``), so a
custom algorithm without it still builds (in full) as a player.

An algorithm is built from specs alone. One written before the Learner existed
may still take ``config`` (and ``env``) in its constructor: it gets the
TrainerConfig (learner and actor roles) and ``env=None``.
"""
from typing import Any, Dict, List, Optional

import torch


from alf.algorithms.data_transformers import create_data_transformer
from alf.environments.env_specs import EnvSpecs  # noqa: F401 - the experiment's spec type, re-exported
from alf.errors import ConfigError
from alf.utils import precision
from alf.utils.finite_guard import FiniteGuard
from alf.utils.run_context import RunContext
from alf.utils.signatures import eval_kwargs, takes_argument

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
    legacy: Dict[str, Any] = dict(eval_kwargs(config.algorithm_ctor, role == "player"))
    if takes_argument(config.algorithm_ctor, "config"):
        legacy["config"] = None if role == "player" else config
    if context is None:
        context = RunContext(
            config.num_iterations, config.num_env_steps, summary_interval=config.summary_interval,
            summarize_first_interval=config.summarize_first_interval)
    # actors/players act on the CPU; policy workers batch inference on the learner's device
    device = config.device if role in ("learner", "policy") else "cpu"
    context.train_dtype = precision.resolve(
        "train_precision", getattr(config, "train_precision", "fp32"), device)
    context.act_dtype = precision.resolve(
        "act_precision", getattr(config, "act_precision", "fp32"), device)
    context.finite_guard = FiniteGuard() if getattr(config, "check_finite", True) else None
    algorithm = config.algorithm_ctor(
        observation_spec=transformer.transformed_observation_spec,
        action_spec=specs.action_spec, reward_spec=specs.reward_spec, context=context, **legacy)
    algorithm.set_data_transformer(transformer)
    try:
        algorithm.to(device)
    except (RuntimeError, AssertionError) as e:
        raise ConfigError(f"TrainerConfig.device='{device}': {e}") from None
    if role == "player":
        algorithm.eval()
    return algorithm


#: attribute of an :class:`~alf.algorithms.algorithm.Algorithm` built with ``is_eval=True``:
#: the names (attributes: sub-modules or parameters) of what its full build has and it left out.
EVAL_OMITTED = "eval_omitted"


def is_eval_build(algorithm: torch.nn.Module) -> bool:
    """Whether ``algorithm`` (or an algorithm inside it) was built with ``is_eval=True``."""
    return any(getattr(m, EVAL_OMITTED, None) is not None for m in algorithm.modules())


def training_only_keys(algorithm: torch.nn.Module, state: Dict[str, Any]) -> List[str]:
    """The keys of a full build's ``state`` (a training checkpoint's ``state["algorithm"]``)
    that the evaluation-only ``algorithm`` leaves out, by one explicit rule:

    - the entries of what an eval-built algorithm names in its ``eval_omitted`` attribute
      (``<path>.<name>`` and everything under it: critics, value and target networks);
    - the ``_extra_state`` of every eval-built algorithm (its optimizer states; an eval
      build has no optimizers). A data transformer's ``_extra_state`` is kept.

    Every other key is loaded strictly: one the eval build expects but ``state`` lacks, or
    one ``state`` has that matches no rule, is still an error naming it."""
    prefixes, extra = [], set()
    for path, module in algorithm.named_modules():
        omitted = getattr(module, EVAL_OMITTED, None)
        if omitted is None:
            continue
        base = f"{path}." if path else ""
        prefixes.extend(base + name for name in omitted)
        extra.add(base + "_extra_state")
    return [k for k in state if k in extra
            or any(k == p or k.startswith(p + ".") for p in prefixes)]


def checkpoint_state_for(algorithm: torch.nn.Module, state: Dict[str, Any]) -> Dict[str, Any]:
    """A checkpoint's algorithm ``state`` (from a full, training build) as ``algorithm``
    loads it: unchanged for a full build; for an eval build (:func:`is_eval_build`)
    without the :func:`training_only_keys` (an eval-built algorithm's ``_extra_state`` is
    its own empty optimizer list). Load the result strictly
    (:func:`alf.trainers.experiment_signature.load_algorithm_state`), so a key the eval
    build expects but the checkpoint lacks is still an error naming it."""
    if not is_eval_build(algorithm):
        return state
    dropped = set(training_only_keys(algorithm, state))
    state = {k: v for k, v in state.items() if k not in dropped}
    for key in algorithm.state_dict():
        if key.endswith("_extra_state") and key in dropped:
            state[key] = {"optimizers": []}
    return state
