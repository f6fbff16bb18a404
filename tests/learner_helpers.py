"""Train an algorithm on an env in a test: a :class:`~alf.trainers.learner.Learner`
around it (algorithms no longer take ``env``/``config``; the Learner owns the loop).

``learner_for(alg, env, config)`` is what ``Alg(..., env=env, config=config)`` was:
a prepared Learner whose ``train_iter`` / ``collect`` / ``replay`` replace the
algorithm's old ``train_iter`` / ``unroll`` / ``sample_replay`` ...
"""
import dataclasses
from typing import Any, Optional

from alf.trainers.learner import Learner
from alf.trainers.training_settings import TrainingSettings
from alf.utils.run_context import RunContext

#: How an algorithm built without a TrainerConfig used to train: one update per
#: iteration (TrainingSettings' defaults are TrainerConfig's: 4), ``mini_batch_length``
#: 1, ``unroll_length`` 8.
CONFIG_LESS = TrainingSettings(num_updates_per_train_iter=1)


def settings_of(config: Any = None, **fields) -> TrainingSettings:
    """The TrainingSettings of ``config`` (a TrainerConfig; None: :data:`CONFIG_LESS`),
    with ``fields`` overridden."""
    base = CONFIG_LESS if config is None else TrainingSettings.from_config(config)
    return dataclasses.replace(base, **fields)


def learner_for(algorithm: Any, env: Any, config: Any = None,
                ctx: Optional[RunContext] = None, **fields) -> Learner:
    """A prepared Learner stepping ``env`` with ``algorithm`` (see :func:`settings_of`);
    the caller closes ``env``."""
    return Learner.for_env(algorithm, env, settings_of(config, **fields), ctx)
