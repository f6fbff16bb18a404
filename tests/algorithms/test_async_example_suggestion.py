"""PPO refused with async_unroll=True names the bundled APPO example for the user's env
(a CartPole user is not sent to appo_atari.gin)."""
import pytest

from alf.example_catalog import examples_using, suggest_examples

# the fallback: every bundled APPO example with its env, Atari last
ALL_APPO = ("--conf=appo_cart_pole.gin (CartPole-v1) or --conf=appo_grid_multidiscrete.gin "
            "(GridMove-v0) or --conf=appo_hybrid_action.gin (HybridTarget-v0) or "
            "--conf=appo_atari.gin (ALE/Breakout-v5)")
ASYNC = ["--conf_param", "TrainerConfig.async_unroll=True",
         "--conf_param", "TrainerConfig.num_iterations=1"]


@pytest.mark.parametrize("conf, extra, wanted, not_wanted", [
    ("ppo_cart_pole.gin", [], "e.g. --conf=appo_cart_pole.gin", "appo_atari"),
    ("ppo_cart_pole.gin", ["--conf_param", "create_environment.env_name='Acrobot-v1'"],
     "e.g. " + ALL_APPO, None),
    ("ppo_atari.gin", ["--conf_param", "create_environment.env_name='ALE/Pong-v5'"],
     "e.g. --conf=appo_atari.gin", "appo_cart_pole"),
    # an action-nest user is sent to the APPO example of the same task
    ("ppo_hybrid_action.gin", [], "e.g. --conf=appo_hybrid_action.gin", "appo_cart_pole"),
])
def test_ppo_async_error_names_the_appo_example_for_the_env(alf_cli, tmp_path, conf, extra,
                                                            wanted, not_wanted):
    run = alf_cli.run("alf.bin.train", [f"--conf={conf}", "--root_dir=runs/x", *ASYNC, *extra],
                      tmp_path, timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "use APPOAlgorithm" in lines[0] and wanted in lines[0], lines[0]
    if not_wanted:
        assert not_wanted not in lines[0], lines[0]
    assert not (tmp_path / "runs" / "x").exists()


def test_examples_using_reads_includes():
    appo = dict(examples_using("APPOAlgorithm"))
    assert appo == {"appo_atari.gin": "ALE/Breakout-v5", "appo_cart_pole.gin": "CartPole-v1",
                    "appo_grid_multidiscrete.gin": "GridMove-v0",
                    "appo_hybrid_action.gin": "HybridTarget-v0"}


@pytest.mark.parametrize("env, expected", [
    ("CartPole-v1", "--conf=appo_cart_pole.gin"),
    ("BreakoutNoFrameskip-v4", "--conf=appo_atari.gin"),
    ("ALE/Breakout-v5", "--conf=appo_atari.gin"),
    (None, ALL_APPO),
])
def test_suggestion_prefers_the_same_env_then_the_same_family(env, expected):
    assert suggest_examples("APPOAlgorithm", env) == expected
