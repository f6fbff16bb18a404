"""``--help`` and the discovery flags (``--list_examples``, ``--list_configurables``,
``--describe``) of ``alf.bin.train`` / ``alf.bin.play`` and the ``alf-train``
console script, run as real commands in a subprocess.

All commands run in one module-scoped fixture: the console scripts start together
as fresh interpreters (their entry points are the subject), the ``python -m`` cases
run meanwhile through ``alf_cli.run`` (forks of a process that imported alf); each
test then checks its own case. The docstring parsing
behind ``--describe`` is checked in-process at the end.
"""
import os
import subprocess
import sys

import pytest

from alf import config_help

CONSOLE_TRAIN = os.path.join(os.path.dirname(sys.executable), "alf-train")
CONSOLE_PLAY = os.path.join(os.path.dirname(sys.executable), "alf-play")

# name -> (module or console-script path, arguments). Each interpreter start costs ~2 s of
# CPU (torch), so the help spellings that share a code path (-h, --helpshort, -help) are
# spread over the commands here and checked all together in-process (test_help_tokens).
CASES = {
    "train_help": ("alf.bin.train", ["--help"]),
    "train_h": ("alf.bin.train", ["--conf_param", "x", "-h"]),
    "train_helpfull": ("alf.bin.train", ["--helpfull"]),
    "play_helpshort": ("alf.bin.play", ["--helpshort"]),
    "console_train_helpshort": (CONSOLE_TRAIN, ["--helpshort"]),
    "console_play_helpfull": (CONSOLE_PLAY, ["--helpfull"]),
    "console_train_typo": (CONSOLE_TRAIN, ["--conff", "x.gin"]),
    "discovery": ("alf.bin.train", ["--list_examples", "--list_configurables",
                                    "--describe", "PPOAlgorithm", "--describe", "TrainerConfig"]),
    "describe_unknown": ("alf.bin.train", ["--describe", "PPOAlgorithmm"]),
    "describe_with_conf": ("alf.bin.train", ["--conf", "ppo_cart_pole.gin",
                                             "--describe", "PPOAlgorithm.gamma",
                                             "--describe", "PPOLoss"]),
    "play_describe": ("alf.bin.play", [
        "--describe", "create_environment",
        "--conf_param", "create_environment.num_parallel_environments=3"]),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory, alf_cli):
    """name -> (returncode, stdout, stderr, cwd) for every case in CASES."""
    procs, out = {}, {}
    for name, (cmd, args) in CASES.items():
        if not os.path.isabs(cmd):
            continue
        cwd = tmp_path_factory.mktemp(name)
        if not os.path.exists(cmd):
            procs[name] = None  # console scripts not installed (pip install -e .)
            continue
        procs[name] = (subprocess.Popen([cmd, *args], cwd=str(cwd), env=alf_cli.env(),
                                        text=True, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE), cwd)
    for name, (cmd, args) in CASES.items():
        if not os.path.isabs(cmd):
            cwd = tmp_path_factory.mktemp(name)
            p = alf_cli.run(cmd, args, cwd, timeout=180)
            out[name] = (p.returncode, p.stdout, p.stderr, cwd)
    for name, started in procs.items():
        if started is None:
            out[name] = None
            continue
        p, cwd = started
        try:
            stdout, stderr = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        out[name] = (p.returncode, stdout, stderr, cwd)
    return out


def _ok(results, name):
    if results[name] is None:
        pytest.skip("console scripts not installed (pip install -e .)")
    rc, stdout, stderr, cwd = results[name]
    assert rc == 0, f"exit {rc}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    assert os.listdir(cwd) == [], "a help/discovery command wrote files"
    return stdout


def _flag_lines(text):
    return {line.split(":")[0].strip() for line in text.splitlines() if line.startswith("  -")}


@pytest.mark.parametrize("name", ["train_help", "train_h", "console_train_helpshort"])
def test_train_help_shows_usage_and_own_flags(results, name):
    out = _ok(results, name)
    usage = "alf-train" if name.startswith("console") else "python -m alf.bin.train"
    assert out.splitlines()[0] == f"usage: {usage} [flags]"
    assert "Train an agent described by a gin file." in out  # the module docstring
    flag_names = _flag_lines(out)
    for flag in ("--conf", "--root_dir", "--conf_param", "--[no]debug", "--describe",
                 "--[no]list_examples", "--[no]list_configurables", "-h,--[no]help"):
        assert flag in flag_names, f"{flag} missing from:\n{out}"
    assert "--num_episodes" not in out  # play's flag
    assert "--verbosity" not in out  # absl's logging flags are for --helpfull only
    assert "--helpfull" in out


@pytest.mark.parametrize("name", ["play_helpshort"])
def test_play_help_shows_usage_and_own_flags(results, name):
    out = _ok(results, name)
    assert out.splitlines()[0] == "usage: python -m alf.bin.play [flags]"
    flag_names = _flag_lines(out)
    for flag in ("--root_dir", "--num_episodes", "--record_video", "--describe", "-h,--[no]help"):
        assert flag in flag_names, f"{flag} missing from:\n{out}"
    assert "--conf:" not in out  # train's flag


@pytest.mark.parametrize("name", ["train_helpfull", "console_play_helpfull"])
def test_helpfull_lists_every_flag(results, name):
    out = _ok(results, name)
    flag_names = _flag_lines(out)
    for flag in ("--root_dir", "-v,--verbosity", "--[no]logtostderr", "--describe",
                 "--[no]helpfull"):
        assert flag in flag_names, f"{flag} missing from:\n{out}"


def test_unknown_flag_points_to_working_help(results):
    if results["console_train_typo"] is None:
        pytest.skip("console scripts not installed (pip install -e .)")
    rc, stdout, stderr, _ = results["console_train_typo"]
    assert rc == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 2 and "Unknown command line flag 'conff'" in lines[0], stderr
    assert lines[1] == "Run `alf-train --help` for the list of flags."


def test_list_examples_one_line_each(results):
    out = _ok(results, "discovery").split("gin configurables (")[0]
    gins = sorted(f for f in os.listdir(config_help.EXAMPLES_DIR) if f.endswith(".gin"))
    listed = [line.split()[0] for line in out.splitlines()
              if line.startswith("  ") and line.split()[0].endswith(".gin")]
    assert sorted(listed) == gins  # every example exactly once
    line = next(l for l in out.splitlines() if l.startswith("  ppo_cart_pole.gin "))
    assert "PPO on CartPole-v1" in line
    atari = next(l for l in out.splitlines() if l.startswith("  ppo_atari.gin "))
    assert atari.endswith("[atari]")
    shared = [l.split()[0] for l in out.split("Shared settings")[1].splitlines()
              if l.startswith("  ")]
    assert shared == ["atari.gin", "sac_actor.gin"]
    assert "--conf=ppo_cart_pole.gin --root_dir=runs/ppo_cart_pole" in out


def test_list_configurables_grouped_with_summaries(results):
    out = _ok(results, "discovery").split("gin configurables (")[1].split("PPOAlgorithm  (")[0]
    lines = out.splitlines()
    assert "alf.algorithms:" in lines and "alf.networks:" in lines
    ppo = next(l for l in lines if l.strip().startswith("PPOAlgorithm "))
    assert "Proximal Policy Optimization" in ppo
    assert any(l.strip().startswith("TrainerConfig ") for l in lines)
    assert any(l.strip().startswith("ReinforceAlgorithm ") for l in lines)  # example algorithm
    assert "@torch.tanh" in out


def _param_line(out, name):
    return next(l for l in out.splitlines() if l.startswith(f"  {name} "))


def test_describe_ppo_algorithm(results):
    out = _ok(results, "discovery")
    out = out[out.index("PPOAlgorithm  (class "):out.index("TrainerConfig  (class ")]
    assert out.startswith("PPOAlgorithm  (class alf.algorithms.ppo_algorithm.PPOAlgorithm)")
    gamma = _param_line(out, "gamma")
    assert "gamma = 0.99" in gamma and "discount factor" in gamma
    # documented in the base class (ActorCriticAlgorithm / RLAlgorithm "see" links)
    assert "optimizer factory" in _param_line(out, "optimizer")
    assert "observation spec" in _param_line(out, "observation_spec (required)")
    assert "@PPOLoss" in _param_line(out, "loss_ctor")  # defaults in gin syntax
    assert "(undocumented)" not in out


def test_describe_trainer_config_lists_every_field(results):
    import inspect
    from alf.trainers.trainer_config import TrainerConfig
    out = _ok(results, "discovery")
    out = out[out.index("TrainerConfig  (class "):]
    fields = [p for p in inspect.signature(TrainerConfig.__init__).parameters if p != "self"]
    for field in fields:
        _param_line(out, field)  # each is listed
    assert "num_env_steps = 0" in _param_line(out, "num_env_steps")
    assert "stop after this many environment steps" in _param_line(out, "num_env_steps")
    assert "priority exponent" in _param_line(out, "priority_replay_alpha")


def test_describe_unknown_name_is_one_line_exit_2(results):
    rc, stdout, stderr, _ = results["describe_unknown"]
    assert rc == 2 and stdout == ""
    assert stderr.strip().splitlines() == [
        "alf.bin.train: error: unknown configurable 'PPOAlgorithmm'. Did you mean: "
        + stderr.split("Did you mean: ")[1].split("?")[0] + "? --list_configurables lists "
        "them all."]
    assert "PPOAlgorithm," in stderr


def test_describe_with_conf_shows_the_configs_values(results):
    out = _ok(results, "describe_with_conf")
    # ppo_cart_pole.gin sets gamma; only the parameter asked for is shown, on one line
    first, wrapped = out.splitlines()[:2]  # the declared range wraps onto a second line
    assert first + " " + wrapped.strip() == (
        "PPOAlgorithm.gamma = 0.98  (default: 0.99)  discount factor of the returns and "
        "advantages. Must be in [0, 1].")
    assert "gae_lambda" not in out
    assert "@clip/LinearSchedule()  (default: 0.2)" in \
        _param_line(out, "importance_ratio_clipping")


def test_play_describe_function_configurable(results):
    out = _ok(results, "play_describe")
    assert "env_name = 'CartPole-v1'" in _param_line(out, "env_name")
    assert "gymnasium id" in _param_line(out, "env_name")
    assert "num_parallel_environments = 3  (default: 1)" in out  # the --conf_param


# ---------------------------------------------------------------------------- in-process

PPO_STYLE = '''Proximal Policy Optimization.

    Args: as :class:`Base` (including ``x``, shared by
    the heads), plus
        gamma, gae_lambda: advantage estimation
            (GAE over the whole buffer).
        loss_ctor (callable): defaults to :class:`PPOLoss`.
        *args: ignored.
    Normalised leaves are float32.

    Returns:
        not_a_param: nothing.
    '''


def test_parse_param_docs_google_style_variants():
    docs = config_help.parse_param_docs(PPO_STYLE)
    assert docs == {"gamma": "advantage estimation (GAE over the whole buffer).",
                    "gae_lambda": "advantage estimation (GAE over the whole buffer).",
                    "loss_ctor": "defaults to :class:`PPOLoss`.",
                    "args": "ignored."}
    attrs = config_help.parse_param_docs("X.\n\nAttributes:\n    a: first.\n    b: second\n"
                                         "        line.\n")
    assert attrs == {"a": "first.", "b": "second line."}
    assert config_help.parse_param_docs(None) == {} and config_help.parse_param_docs("x") == {}


def test_see_links_follow_base_classes():
    config_help.register_all()
    from alf.algorithms.dqn_algorithm import DqnAlgorithm
    # "n_step, gamma, ...: see OffPolicyAlgorithm (DQN default: ...)" -> the base's text; the
    # note cannot be attributed to one of the four parameters, so it is left out
    assert config_help.param_doc(DqnAlgorithm, "target_update_period") == \
        "update targets every this many gradient steps."
    assert config_help.param_doc(DqnAlgorithm, "gamma") == "discount factor."
    # "Args: as :class:`DdpgAlgorithm`" -> found through the base class
    from alf.algorithms.td3_algorithm import Td3Algorithm
    assert config_help.param_doc(Td3Algorithm, "num_critics").startswith("critic ensemble size")


def test_every_example_has_a_one_sentence_description():
    for example in config_help.list_examples():
        assert example.description != config_help.NO_DESCRIPTION, example.name
        assert example.description.endswith("."), example


def test_help_tokens():
    from alf.bin import cli
    for token in ("-h", "--help", "-help", "--helpshort", "-helpshort", "-?"):
        assert cli.wants_help(["prog", "--conf", "x.gin", token]) == "short", token
    for token in ("--helpfull", "-helpfull"):
        assert cli.wants_help(["prog", token]) == "full", token
    assert cli.wants_help(["prog", "--conf", "x.gin"]) is None
    assert cli.wants_help(["prog", "--", "--help"]) is None  # after "--": not a flag
    assert cli.invocation("/venv/bin/alf-play", "alf.bin.play") == "alf-play"
    assert cli.invocation("/repo/alf/bin/play.py", "alf.bin.play") == "python -m alf.bin.play"


def test_positional_arguments_are_a_usage_error(alf_cli, tmp_path):
    """`train help` used to be ignored silently ("--root_dir is required")."""
    proc = alf_cli.run("alf.bin.train", ["help"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "alf.bin.train: unexpected argument(s) help: every option is a flag "
        "(e.g. --conf=ppo_cart_pole.gin); see --help"]


def test_describe_unknown_parameter_names_the_configurable(alf_cli, tmp_path):
    proc = alf_cli.run("alf.bin.train", ["--describe", "TrainerConfig.num_env_step"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "alf.bin.train: error: TrainerConfig has no parameter 'num_env_step'. Did you mean: "
        "num_env_steps, num_env_workers, milestone_env_steps?"]
