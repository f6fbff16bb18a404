"""Check a study's runs can start before starting any: a typo'd parameter or a bad value
fails once, in one line, instead of in every run."""
from typing import Sequence

import gin

from alf import config as alf_config
from alf.studies.search_space import SearchSpace
from alf.trainers.trainer_config import TrainerConfig


def check_runs_can_start(conf: str, conf_params: Sequence[str],
                         space: SearchSpace) -> TrainerConfig:
    """Parse ``conf`` with ``conf_params`` and each swept value once (a list's every value,
    a range's bounds) and build TrainerConfig (it checks values); gin is left cleared.

    Returns:
        the TrainerConfig of the conf with ``conf_params`` alone (e.g. its num_env_steps).

    Raises:
        ConfigError: one line naming the binding (file and line, or --conf_param/--param).
    """
    try:
        for param in space.params:
            values = list(param.choices) if param.is_list else [param.low, param.high]
            for value in values:
                bindings = list(conf_params) + [f"{param.name}={param.gin_text(value)}"]
                alf_config.parse_config(conf_file=conf, conf_params=bindings)
                TrainerConfig()
        alf_config.parse_config(conf_file=conf, conf_params=list(conf_params))
        return TrainerConfig()
    finally:
        gin.clear_config()
