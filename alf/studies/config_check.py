"""Check a study's runs can start before starting any: a typo'd parameter, a bad value or a
conf that never writes the study's metric fails once, in one line, instead of in every run
(after training it fully, for the metric)."""
from typing import Optional, Sequence

import gin

from alf import config as alf_config
from alf.errors import ConfigError
from alf.studies.search_space import Param, SearchSpace
from alf.trainers.trainer_config import TrainerConfig


def check_runs_can_start(conf: str, conf_params: Sequence[str], space: SearchSpace,
                         metric: Optional[str] = None) -> TrainerConfig:
    """Parse ``conf`` with ``conf_params`` and each swept value once (a list's every value,
    a range's bounds) and build TrainerConfig (it checks values); gin is left cleared.

    Args:
        metric: the curve the study scores: with ``eval_return`` every run must evaluate.

    Returns:
        the TrainerConfig of the conf with ``conf_params`` alone (e.g. its num_env_steps).

    Raises:
        ConfigError: one line naming the binding (file and line, ``--conf_param`` or
            ``--param``), or the ``--conf_param`` that makes the runs evaluate.
    """
    try:
        alf_config.parse_config(conf_file=conf, conf_params=list(conf_params))
        config = TrainerConfig()
        _check_metric(config, conf, metric)
        for param in space.params:
            values = list(param.choices) if param.is_list else [param.low, param.high]
            for value in values:
                _check_swept(conf, conf_params, param, param.gin_text(value), metric)
        return config
    finally:
        gin.clear_config()


def _check_swept(conf: str, conf_params: Sequence[str], param: Param, text: str,
                 metric: Optional[str]) -> None:
    """The conf with one swept value; a message about it names ``--param``, which the user
    wrote, not the ``--conf_param`` each run gets it as."""
    binding = f"{param.name}={text}"
    try:
        alf_config.parse_config(conf_file=conf, conf_params=list(conf_params) + [binding])
        config = TrainerConfig()
    except ConfigError as e:
        raise ConfigError(str(e).replace(f"--conf_param '{binding}'",
                                         f"--param {binding}")) from None
    _check_metric(config, conf, metric, f" with --param {binding}")


def _check_metric(config: TrainerConfig, conf: str, metric: Optional[str],
                  where: str = "") -> None:
    if metric == "eval_return" and not config.evaluate:
        raise ConfigError(
            f"--metric eval_return: {conf}{where} does not evaluate (TrainerConfig.evaluate = "
            "False), so no run would write an eval_return point: add --conf_param "
            "'TrainerConfig.evaluate=True' (every TrainerConfig.eval_interval iterations and "
            "at the end), or score the training return with --metric train_return")
