"""TrainerConfig rejects impossible values at construction, naming the field."""
import pytest

from alf.errors import ConfigError
from alf.trainers.trainer_config import TrainerConfig

pytestmark = pytest.mark.usefixtures("clean_gin")  # no bindings left over from other tests


@pytest.mark.parametrize("field, value", [
    ("checkpoint_interval", 0), ("eval_interval", 0), ("summary_interval", 0),
    ("num_eval_episodes", 0), ("num_eval_environments", 0), ("num_checkpoints", 0),
    ("unroll_length", -1), ("unroll_length", 2.5), ("mini_batch_size", 0),
    ("epsilon_greedy", 1.5),
])
def test_bad_values_name_the_field(field, value):
    with pytest.raises(ConfigError, match=f"TrainerConfig.{field}"):
        TrainerConfig(algorithm_ctor=object, num_iterations=1, **{field: value})


def test_needs_an_algorithm_and_a_stopping_criterion():
    with pytest.raises(ConfigError, match="algorithm_ctor"):
        TrainerConfig(num_iterations=1)
    with pytest.raises(ConfigError, match="num_iterations or TrainerConfig.num_env_steps"):
        TrainerConfig(algorithm_ctor=object)
    TrainerConfig(algorithm_ctor=object, num_env_steps=10, unroll_length=0.25)  # fine
