"""The env worker's config slice (ActorSettings) and how it gets the run's full config."""
import pickle

import gin
import pytest

from alf.unrollers import env_worker
from alf.unrollers.async_settings import AsyncSettings
from alf.unrollers.env_worker import ActorSettings, WorkerSpec


def _spec(**kwargs):
    return WorkerSpec(worker_id=0, incarnation=0, config_text="", seed=0, envs_per_group=1,
                      env_id_offsets=[0], slots=[], weights=None, heartbeat=None,
                      first_seq=0, learner_pid=1, **kwargs)


def test_from_trainer_config(clean_gin):
    from alf.trainers.trainer_config import TrainerConfig
    cfg = TrainerConfig(algorithm_ctor=dict, num_iterations=1, async_mode="deterministic",
                        unroll_parameter_update_period=3, env_worker_threads=2,
                        initial_collect_steps=50)
    settings = AsyncSettings.from_config(cfg)
    assert settings.unroll_parameter_update_period == 3 and settings.initial_collect_steps == 50
    s = settings.actor_settings()
    assert s == ActorSettings(deterministic=True, update_period=3, num_threads=2,
                              initial_collect_steps=50)
    assert not AsyncSettings.from_config(TrainerConfig(
        algorithm_ctor=dict, num_iterations=1, async_mode="serial")).actor_settings().deterministic
    with pytest.raises(Exception):  # frozen
        s.num_threads = 4
    assert pickle.loads(pickle.dumps(s)) == s


def test_worker_spec_carries_the_settings_the_unroller_builds():
    s = ActorSettings(deterministic=True, update_period=2, num_threads=3, initial_collect_steps=7)
    assert _spec(settings=s).settings is s
    with pytest.raises(TypeError):  # the slice is required: no silent defaults
        _spec()


def test_the_run_config_is_found_by_its_gin_name():
    """The worker rebuilds the run's config as gin.get_configurable(RUN_CONFIG)(), without
    importing alf.trainers; it must be the TrainerConfig class itself."""
    import alf  # noqa: F401 - registers the configurables, as parse_config does
    from alf.trainers.trainer_config import TrainerConfig
    assert gin.get_configurable(env_worker.RUN_CONFIG) is TrainerConfig


def test_env_worker_does_not_import_the_trainers():
    import ast
    import inspect
    tree = ast.parse(inspect.getsource(env_worker))
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in modules if m and m.startswith("alf.trainers")], modules
