"""Build what a Trainer trains: the algorithm, its source of experience and its Learner.

Three shapes, from the config alone:

- **sync**: the training envs in this process (a
  :class:`~alf.unrollers.sync_unroller.SyncUnroller` over them);
- **async**: env worker processes (:class:`~alf.unrollers.async_unroller.AsyncUnroller`);
- **pure offline** (``offline_buffer_dir`` with ``unroll_length=0``): no training env;
  the specs are the configured env's (built and closed at once, never stepped) or
  the first dataset's.

A data-parallel rank's envs get the ids (and so the seeds) after the lower ranks'.
"""
from typing import Any, NamedTuple, Optional

import gin

from alf.datasets.offline_buffer import dataset_env_specs, dataset_paths
from alf.environments import create_environment
from alf.errors import ConfigError
from alf.experiment import EnvSpecs, build_algorithm
from alf.trainers import data_parallel_trainer as dp
from alf.trainers.learner import Learner
from alf.trainers.learner_thread import check_threadable
from alf.trainers.training_settings import TrainingSettings
from alf.unrollers.async_settings import AsyncSettings
from alf.unrollers.async_unroller import AsyncUnroller, probe_env_specs
from alf.unrollers.sync_unroller import SyncUnroller
from alf.utils.process_signals import sigint_ignored_in_children
from alf.utils.run_context import RunContext


class BuiltLearner(NamedTuple):
    """What :func:`build_learner` made (the caller owns and closes ``env``/``unroller``)."""
    learner: Learner
    env: Any = None  # the sync unroller's training env
    offline_specs: Optional[EnvSpecs] = None  # pure offline: the specs trained against


def build_learner(config: Any, context: RunContext, config_text: str,
                  rank_group: Any = None) -> BuiltLearner:
    """The algorithm, unroller and prepared :class:`Learner` of ``config`` (a
    ``TrainerConfig``); ``config_text`` is what async env workers re-parse."""
    settings = TrainingSettings.from_config(config)
    rank = rank_group.rank if rank_group is not None else 0
    if config.learner_thread and rank_group is not None:
        raise ConfigError("TrainerConfig.learner_thread=True under torchrun: the ranks average "
                          "gradients in lock-step from their main threads; set "
                          "learner_thread=False for data-parallel runs")
    if config.offline_only:
        specs = probe_env_specs() if env_name_bound() else \
            dataset_env_specs(dataset_paths(config.offline_buffer_dir)[0])
        algorithm = build_algorithm(config, specs, "learner", context)
        learner = _learner(algorithm, settings, context, None, specs)
        learner.prepare()
        return BuiltLearner(learner, offline_specs=specs)
    if config.async_unroll and rank_group is not None and not config.unroll_length \
            and config.async_mode == "processes":
        raise ConfigError(
            "torchrun with TrainerConfig.async_unroll=True and unroll_length=0 (each "
            "iteration takes whatever trajectories are ready): the ranks would train on "
            "batches of different sizes and their updates would not pair up. Set "
            "TrainerConfig.unroll_length to the trajectory length (e.g. 32), or "
            "async_mode='deterministic'")
    if config.async_unroll:
        specs = probe_env_specs()
        algorithm = build_algorithm(config, specs, "learner", context)
        unroller = AsyncUnroller(AsyncSettings.from_config(config), config_text, specs, context,
                                 run_config=config)
        if rank_group is not None:
            unroller.set_rank(rank, dp.RANK_SEED_STRIDE)
        try:
            learner = _learner(algorithm, settings, context, unroller)
            learner.prepare()
            unroller.connect(algorithm, learner.experience_spec())
        except BaseException:
            unroller.close()
            raise
        return BuiltLearner(learner)
    with sigint_ignored_in_children():
        env = create_environment(seed=config.random_seed,
                                 env_id_offset=rank * dp.configured_num_envs(),
                                 report_executed_action=config.overwrite_policy_output)
    try:
        algorithm = build_algorithm(config, EnvSpecs.of(env), "learner", context)
        unroller = SyncUnroller.for_algorithm(env, algorithm, config.metric_buffer_size,
                                              config.overwrite_policy_output)
        learner = _learner(algorithm, settings, context, unroller)
        learner.prepare()
    except BaseException:
        env.close()
        raise
    return BuiltLearner(learner, env=env)


def _learner(algorithm: Any, settings: TrainingSettings, context: RunContext, unroller: Any,
             specs: Optional[EnvSpecs] = None) -> Learner:
    """The algorithm's declared Learner class (``RLAlgorithm.learner_class``) or the
    standard one."""
    moved = sorted(m for m in _LOOP_METHODS_BEFORE_THE_LEARNER
                   if any(m in vars(k) for k in type(algorithm).__mro__
                          if k is not object and not k.__module__.startswith("alf.algorithms")
                          and not k.__module__.startswith("torch")))
    if moved:
        raise ConfigError(
            f"{type(algorithm).__name__} overrides {', '.join(moved)}: the training loop "
            "moved from RLAlgorithm to alf.trainers.learner.Learner, which would not call "
            "them. Move that code into a Learner subclass named in "
            f"{type(algorithm).__name__}.learner_class (docs/writing_an_algorithm.md, "
            "'Where the loop lives, and replacing it')")
    cls = getattr(algorithm, "learner_class", None) or Learner
    if not (isinstance(cls, type) and issubclass(cls, Learner)):
        raise ConfigError(f"{type(algorithm).__name__}.learner_class must be a subclass of "
                          f"alf.trainers.learner.Learner, got {cls!r}")
    if specs is None:
        learner = cls(algorithm, settings, context, unroller)
    else:
        learner = cls(algorithm, settings, context, unroller,
                      time_step_spec=specs.time_step_spec, env_name=specs.env_name)
    if settings.learner_thread:
        check_threadable(learner)
    return learner


def eval_env_kwargs(offline_specs: Optional[EnvSpecs]) -> dict:
    """Pure offline: the evaluation env is the dataset's unless the config names one."""
    if offline_specs is None or env_name_bound():
        return {}
    return {"env_name": offline_specs.env_name}


#: RLAlgorithm's loop methods before the Learner: an algorithm overriding one expects
#: it to be called
_LOOP_METHODS_BEFORE_THE_LEARNER = (
    "train_iter", "unroll", "observe_unroll", "observe_for_replay", "train_from_replay_buffer",
    "sample_replay", "gather_replay", "prepare", "attach_unroller")


def env_name_bound() -> bool:
    """Whether the config names the env (``create_environment.env_name``)."""
    try:
        gin.query_parameter("create_environment.env_name")
        return True
    except ValueError:
        return False
