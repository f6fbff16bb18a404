"""Config mistakes become one line naming file, line and parameter (checked in-process;
the real command is exercised in test_train_cli_errors.py)."""
import logging

import gin
import pytest

from alf import config as alf_config
from alf.bin import cli
from alf.errors import ConfigError, EnvironmentNotFoundError


def _error(tmp_path, text, params=(), name="exp.gin"):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        alf_config.parse_config(conf_file=str(path), conf_params=list(params))
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("text, expected", [
    ("include 'ppo_cart_pol.gin'\n",
     ["exp.gin, line 1", "'ppo_cart_pol.gin' not found", "Did you mean: ppo_cart_pole.gin"]),
    ("include 'ppo_cart_pole.gin'\nTrainerConfig.num_iterations == 3\n",
     ["exp.gin, line 2", "syntax error"]),
    ("include 'ppo_cart_pole.gin'\nPPOAlgorithm.gamma = (0.9\n",
     ["exp.gin", "syntax error", "unclosed bracket"]),
    ("include 'ppo_cart_pole.gin'\nTrainerConfig.algorithm_ctor = @PPOAlgoritm\n",
     ["exp.gin, line 2", "unknown reference 'PPOAlgoritm'", "Did you mean: PPOAlgorithm"]),
    ("# one\n# two\nPPOAlgorithm.gama = 0.9\n",
     ["exp.gin, line 3", "'gama'", "Did you mean: gamma?"]),
], ids=["include", "syntax", "unclosed", "reference", "param"])
def test_gin_file_errors(tmp_path, clean_gin, text, expected):
    msg = _error(tmp_path, text)
    for part in expected:
        assert part in msg, msg


def test_error_in_included_file_names_that_file(tmp_path, clean_gin):
    (tmp_path / "base.gin").write_text("include 'ppo_cart_pole.gin'\n\nPPOAlgorithm.gama = 0.9\n")
    msg = _error(tmp_path, "include 'base.gin'\n")
    assert "base.gin, line 3" in msg and "Did you mean: gamma?" in msg


def test_conf_param_error_names_the_binding(tmp_path, clean_gin):
    msg = _error(tmp_path, "include 'ppo_cart_pole.gin'\n", ["PPOAlgorith.gamma = 0.9"])
    assert "--conf_param 'PPOAlgorith.gamma = 0.9'" in msg and "Did you mean: PPOAlgorithm" in msg


def test_include_resolves_from_any_cwd_and_search_paths_do_not_pile_up(
        tmp_path, monkeypatch, clean_gin, caplog):
    sub = tmp_path / "exp"
    sub.mkdir()
    (sub / "base.gin").write_text("include 'ppo_cart_pole.gin'\nTrainerConfig.num_iterations = 7\n")
    (sub / "top.gin").write_text("include 'base.gin'\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sizes = set()
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            alf_config.parse_config(conf_file=str(sub / "top.gin"))
            sizes.add(len(gin.config._LOCATION_PREFIXES))  # pylint: disable=protected-access
    assert gin.query_parameter("TrainerConfig.num_iterations") == 7
    assert len(sizes) == 1
    # gin's include probing logs "Path not found" errors; they must not reach the user
    assert not [r for r in caplog.records if "Path not found" in r.getMessage()]


def test_run_main_maps_errors_to_exit_2_without_gin_context(capsys):
    def bad_env():
        # what gin raises when create_environment fails inside a configurable call
        raise EnvironmentNotFoundError(
            "Unknown environment 'X'. Did you mean: Y?\n  In call to configurable "
            "'create_environment' (<function create_environment at 0x1>)")
    assert cli.run_main(bad_env, "prog") == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "prog: error: Unknown environment 'X'. Did you mean: Y?\n"

    def interrupted():
        raise KeyboardInterrupt
    assert cli.run_main(interrupted, "prog") == cli.EXIT_INTERRUPTED


def test_bad_value_is_traced_to_the_file_and_line_that_set_it(tmp_path, clean_gin, capsys):
    from alf.trainers.trainer_config import TrainerConfig
    (tmp_path / "base.gin").write_text("include 'ppo_cart_pole.gin'\n"
                                       "TrainerConfig.unroll_length = 4\n")
    exp = tmp_path / "exp.gin"
    exp.write_text("include 'base.gin'\n\nTrainerConfig.unroll_length = -2\n")
    alf_config.parse_config(conf_file=str(exp))
    assert alf_config.binding_location("TrainerConfig.unroll_length") == f"{exp}, line 3"
    example = f"{alf_config.EXAMPLES_DIR}/ppo_cart_pole.gin"
    with open(example) as f:
        line = [i for i, l in enumerate(f, 1) if l.startswith("TrainerConfig.num_env_steps")][-1]
    assert alf_config.binding_location("TrainerConfig.num_env_steps") == f"{example}, line {line}"
    assert cli.run_main(TrainerConfig, "prog") == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unroll_length must be > 0, got -2" in err
    assert f"(set in {exp}, line 3)" in err

    alf_config.parse_config(conf_file=str(exp), conf_params=["TrainerConfig.unroll_length=-5"])
    assert cli.run_main(TrainerConfig, "prog") == cli.EXIT_USAGE
    assert "(set in --conf_param 'TrainerConfig.unroll_length=-5')" in capsys.readouterr().err


def test_include_cycle_names_the_chain_and_the_shadowed_example(tmp_path, clean_gin):
    """A user file named like a bundled example (here atari.gin, which dqn_atari.gin
    includes) shadows it: one message naming the cycle instead of a RecursionError."""
    msg = _error(tmp_path, "include 'dqn_atari.gin'\n", name="atari.gin")
    assert "include cycle" in msg and "dqn_atari.gin" in msg, msg
    assert "'atari.gin') shadows it: rename it" in msg, msg


def test_a_scoped_example_in_a_message_is_not_traced_to_the_unscoped_binding(clean_gin,
                                                                           capsys):
    """A missing part's hint names ``rnd/alf.optimizers.Adam.lr``; the config binds the
    unscoped ``alf.optimizers.Adam.lr`` (ppo_cart_pole.gin): that line is not named."""
    from alf.algorithms.agent import Agent
    from alf.algorithms.rnd_reward_module import RNDRewardModule
    from alf.tensor_specs import BoundedTensorSpec, TensorSpec
    import torch
    alf_config.parse_config(conf_file="ppo_cart_pole.gin")
    assert alf_config.binding_location("alf.optimizers.Adam.lr")  # bound, unscoped
    rc = cli.run_main(lambda: Agent(TensorSpec((4,)), BoundedTensorSpec((), torch.int64, 0, 1),
                                    reward_modules=[RNDRewardModule]), "prog")
    err = capsys.readouterr().err
    assert rc == cli.EXIT_USAGE and "set RNDRewardModule.optimizer" in err
    assert "(set in" not in err
