"""Misleading messages about a user's own env, each now one line with the fix, exit 2 and
nothing written (issue 41, item 4): an id whose registering module the gin file forgot to
import ("Did you mean: Phoenix-v0? Atari ids start with 'ALE/'"), a gym wrapper that
returns None ("vars() argument must have __dict__ attribute") and a plain function in
``gym_wrappers`` ("unknown reference", no fix)."""
import textwrap

from onb_env_source import ONB_ENV

WRAPPERS = textwrap.dedent('''
    import gymnasium as gym

    import alf


    @alf.configurable
    def forgets_return(env):
        env = gym.wrappers.ClipReward(env, -1.0, 1.0)


    def plain_wrapper(env):
        return gym.wrappers.ClipReward(env, -1.0, 1.0)


    @alf.configurable
    def scaled_reward(env, scale=None):
        if scale is None:
            raise ValueError("my wrapper: missing scale")
        return gym.wrappers.TransformReward(env, lambda r: scale * r)
''')

CONF = """
include 'ppo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.random_seed = 1
TrainerConfig.num_iterations = 1
TrainerConfig.unroll_length = 8
TrainerConfig.evaluate = False
"""


def _error(alf_cli, tmp_path, head, tail):
    (tmp_path / "onb_env.py").write_text(ONB_ENV)
    (tmp_path / "my_wrappers.py").write_text(WRAPPERS)
    conf = alf_cli.write_gin(tmp_path, head + CONF + tail, "onb.gin")
    root = tmp_path / "run"
    result = alf_cli.run("alf.bin.train", ["--conf", conf, "--root_dir", str(root)], tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert not root.exists()
    return lines[0]


def test_a_forgotten_import_says_how_to_make_the_id_known(alf_cli, tmp_path):
    line = _error(alf_cli, tmp_path, "", "create_environment.env_name = 'OnbDict-v0'\n")
    assert "Unknown environment 'OnbDict-v0'" in line, line
    assert "import my_module" in line and "'my_module:OnbDict-v0'" in line, line
    assert "gymnasium.register" in line, line


def test_a_wrapper_returning_none_is_named(alf_cli, tmp_path):
    line = _error(alf_cli, tmp_path, "import onb_env\nimport my_wrappers\n", "create_environment.env_name = 'OnbBad-v0'\n"
                  "create_environment.gym_wrappers = [@forgets_return]\n")
    assert "vars()" not in line, line
    assert ("create_environment.gym_wrappers: forgets_return(env) returned None, not a "
            "gymnasium Env") in line, line
    assert "return the wrapped env" in line, line


def test_a_wrapper_that_raises_is_named_not_gym_make(alf_cli, tmp_path):
    """A gym wrapper raising in its constructor was reported as the env's
    ``gym.make()`` raising (review finding)."""
    line = _error(alf_cli, tmp_path, "import onb_env\nimport my_wrappers\n",
                  "create_environment.env_name = 'OnbBad-v0'\n"
                  "create_environment.gym_wrappers = [@scaled_reward]\n")
    assert line == ("alf.bin.train: error: create_environment.gym_wrappers: scaled_reward(env) "
                    "raised ValueError: my wrapper: missing scale"), line


def test_a_plain_function_in_gym_wrappers_says_to_make_it_configurable(alf_cli, tmp_path):
    line = _error(alf_cli, tmp_path, "import onb_env\nimport my_wrappers\n", "create_environment.env_name = 'OnbBad-v0'\n"
                  "create_environment.gym_wrappers = [@plain_wrapper]\n")
    assert "plain_wrapper" in line, line
    assert "plain function in my_wrappers" in line, line
    assert "@alf.configurable" in line and "import alf" in line, line


def test_a_typo_in_a_custom_id_says_did_you_mean_first(alf_cli, tmp_path):
    """With the module imported, a typo in the id is the likely mistake: the close match
    comes before the hint about importing the registering module (which followed first)."""
    line = _error(alf_cli, tmp_path, "import onb_env\n",
                  "create_environment.env_name = 'OnbBda-v0'\n")
    assert line.startswith("alf.bin.train: error: Unknown environment 'OnbBda-v0'. Did you "
                           "mean: OnbBad-v0"), line
    assert line.index("Did you mean") < line.index("If it is your own env"), line


NEEDS_BINDINGS = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class NeedsBindings(gym.Env):
        def __init__(self):
            import my_simulator_bindings  # not installed in this Python
            self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
            self.action_space = gym.spaces.Discrete(2)


    gym.register("NeedsBindings-v0", entry_point=NeedsBindings)
''')


def test_a_package_the_env_imports_but_nobody_installed_is_named_with_its_import(
        alf_cli, tmp_path):
    """An env constructor importing a package that is not installed (and that no alf
    extra installs) was a 60-line ModuleNotFoundError traceback through gin and
    gymnasium, exit 1: now one line naming the module, where the user's code imports it,
    and the fix."""
    (tmp_path / "needs_bindings.py").write_text(NEEDS_BINDINGS)
    line = _error(alf_cli, tmp_path, "import needs_bindings\n",
                  "create_environment.env_name = 'NeedsBindings-v0'\n")
    assert "No module named 'my_simulator_bindings'" in line, line
    assert "needs_bindings.py:8" in line, line  # the user's own import line
    assert "install it" in line and "this Python" in line, line
