"""Bad config *values* fail before anything is built or written (issue: they used to start
training, write root_dir and crash later with a 35-line TypeError, poisoning config.gin).

Each case runs the real command and checks: exit status 2, one line on stderr naming the
parameter, the value, what was expected and where it was set, and no root_dir.
"""
import pytest

from alf.config_checks import describe, matches

CASES = {
    # --conf_param value -> words the one-line error must contain
    "PPOAlgorithm.gamma='abc'": ["PPOAlgorithm.gamma", "'abc'", "a string", "a float",
                                 "--conf_param"],
    "PPOLoss.entropy_regularization='x'": ["PPOLoss.entropy_regularization", "'x'", "a float"],
    "TrainerConfig.num_iterations='abc'": ["TrainerConfig.num_iterations", "'abc'", "an int",
                                           "--conf_param"],
    "create_environment.num_parallel_environments=2.5": [
        "create_environment.num_parallel_environments", "2.5", "a float", "an int"],
    "PPOAlgorithm.gamma=abc": ["abc is not a value", "('abc')", "@abc"],
    "ActorDistributionNetwork.fc_layer_params=(64, 'x')": [
        "ActorDistributionNetwork.fc_layer_params", "(64, 'x')", "whose items are an int"],
    "TrainerConfig.evaluate=1": ["TrainerConfig.evaluate", "True or False"],
    "create_environment.env_name=CartPole-v1": ["CartPole-v1 is not a value",
                                                "('CartPole-v1')"],
    "TrainerConfig.num_iterations=%NOPE": ["the macro NOPE is not defined"],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory, alf_cli):
    """The real command, started together (each is a fresh interpreter importing torch): one
    bad --conf_param and one bad value in a gin file."""
    cwd = tmp_path_factory.mktemp("bad_values")
    alf_cli.write_gin(cwd, alf_cli.TINY_PPO, "tiny.gin")
    alf_cli.write_gin(cwd, alf_cli.TINY_PPO + "PPOAlgorithm.gamma = 'abc'\n", "bad_in_file.gin")
    procs = {"param": alf_cli.start("alf.bin.train", [
        "--conf", "tiny.gin", "--root_dir", "run_param", "--conf_param",
        "PPOAlgorithm.gamma='abc'"], cwd),
        "file": alf_cli.start("alf.bin.train", ["--conf", "bad_in_file.gin", "--root_dir",
                                                "run_file"], cwd)}
    out = {}
    for key, proc in procs.items():
        _, err = proc.communicate(timeout=180)
        out[key] = (proc.returncode, err)
    return cwd, out


def test_bad_value_real_command(results):
    cwd, out = results
    code, err = out["param"]
    assert code == 2, err
    assert err.strip().splitlines() == [
        "alf.bin.train: error: Config error (--conf_param 'PPOAlgorithm.gamma='abc''): "
        "PPOAlgorithm.gamma = 'abc' is a string, but it must be a float (or int)"], err
    assert not (cwd / "run_param").exists()


@pytest.mark.parametrize("param", list(CASES))
def test_bad_value_is_one_line_exit_2_nothing_written(param, alf_cli, tmp_path, monkeypatch,
                                                      capsys, clean_gin):
    from absl import flags

    from alf.bin import train
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO, "tiny.gin")
    monkeypatch.chdir(tmp_path)
    flags.FLAGS.unparse_flags()  # in-process: repeated --conf_param would accumulate
    code = train.main(["alf.bin.train", "--conf", "tiny.gin", "--root_dir", "run",
                       "--conf_param", param])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in CASES[param]:
        assert word in lines[0], (word, lines[0])
    assert "<ast." not in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value, annotation, ok", [
    (2, float, True), (2.5, int, False), (True, int, False), ("a", float, False),
    (None, "Optional[int]", True), (None, int, False), ((1, 2), "Sequence[int]", True),
    ("ab", "Sequence[int]", False), ([1, "a"], "Sequence[int]", False), (1, bool, False),
    ("x", "Callable", False), (3, "Union[float, Callable[[float], float]]", True),
    ((0.9, 0.999), "Tuple[float, float]", True), ((0.9,), "Tuple[float, float]", False),
    ("cpu", "Any", True),
])
def test_matches_type_hints(value, annotation, ok):
    import typing  # noqa: F401 - names for eval below
    from typing import Any, Callable, Optional, Sequence, Tuple, Union  # noqa: F401
    ann = eval(annotation) if isinstance(annotation, str) else annotation  # noqa: S307
    assert matches(value, ann) is ok


def test_references_are_not_judged_as_literals(clean_gin):
    """@Name / @Name() values are only known when called: never rejected here."""
    from alf import config as alf_config
    alf_config.parse_config(conf_file="ppo_cart_pole.gin", conf_params=[
        "PPOLoss.entropy_regularization = @LinearSchedule()"])


def test_describe_reads_like_english():
    from typing import Optional, Sequence
    assert describe(Optional[int]) == "an int or None"
    assert describe(Sequence[int]) == "a list/tuple whose items are an int"


def test_every_default_fits_its_own_type_hint():
    """The checker must never reject a parameter's own default (a `x: float = None` hint
    once made `PPOLoss.value_clipping=None` an error)."""
    import inspect
    import typing

    import alf  # noqa: F401 - registers every configurable
    from alf.config_help import configurables
    wrong = []
    for c in configurables():
        target = c.target.__init__ if inspect.isclass(c.target) else c.target
        hints = typing.get_type_hints(target)
        for name, p in inspect.signature(target).parameters.items():
            if name in hints and p.default is not inspect.Parameter.empty:
                if matches(p.default, hints[name]) is False:
                    wrong.append(f"{c.name}.{name} = {p.default!r}: {hints[name]}")
    assert wrong == []


def test_macros_are_checked_through(clean_gin, tmp_path):
    from alf import config as alf_config
    from alf.errors import ConfigError
    path = tmp_path / "m.gin"
    path.write_text("include 'ppo_cart_pole.gin'\nFOO = 'x'\nBAR = %FOO\nPPOAlgorithm.gamma = %BAR\n")
    with pytest.raises(ConfigError, match=r"m.gin, line 4\): PPOAlgorithm.gamma = 'x' \(through "
                                          r"%BAR\) is a string, but it must be a float"):
        alf_config.parse_config(conf_file=str(path))
    with pytest.raises(ConfigError, match=r"the macro NOPE is not defined"):
        alf_config.parse_config(conf_file="ppo_cart_pole.gin",
                                conf_params=["PPOAlgorithm.gamma = %NOPE"])
    alf_config.parse_config(conf_file="ppo_cart_pole.gin",
                            conf_params=["G = 0.9", "PPOAlgorithm.gamma = %G",
                                         "PPOLoss.value_clipping = None"])
