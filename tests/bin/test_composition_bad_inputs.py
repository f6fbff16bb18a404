"""Bad inputs on the composition surface (Agent roles, reward weights, representation
learners, pretrained parts, evaluation-only builds, nesting, algorithm/role pairs): each
is one ``alf.bin.<cmd>: error:`` line, exit status 2, and nothing written to the run
directory. The cases are bench/composition_bad_inputs.py's (all 45 run there, as cold
``python -m`` starts); this runs a representative subset, one per kind, through the
tests' fork server (issue 39 item 5)."""
import importlib.util
import os
import re
import shutil

import pytest

from conftest import REPO_ROOT, train_run


def _bench():
    spec = importlib.util.spec_from_file_location(
        "composition_bad_inputs", os.path.join(REPO_ROOT, "bench", "composition_bad_inputs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
CASES = {c.name: c for c in BENCH.CASES}
# one per kind; each failed before issue 39's fixes except where noted
SUBSET = [
    "reward_modules_called_in_gin",          # the docs' own `[@RNDRewardModule()]`
    "reward_modules_not_a_list",             # "'ABCMeta' has no len()"
    "weights_schedule_class",                # float() of a LinearSchedule
    "icm_single_step_batches",               # wrote the run directory first
    "representation_single_step_batches",    # wrote the run directory first
    "agent_inside_agent",                    # a 2,830-line RecursionError
    "agent_around_dyna_dqn",                 # an AttributeError after iteration 1
    "rl_algorithm_not_an_algorithm",
    "reinforce_not_imported",                # "unknown reference", no import named
    "dyna_not_imported",
    "agent_called_in_gin",
    "pretrained_garbage_file",               # torch's weights_only text cut mid-word
    "pretrained_pickled_objects",            # the same torch paragraph
    "pretrained_shape_mismatch",             # passed before (kept: pretrained + Agent)
    "play_garbage_checkpoint",               # passed before (kept: play of an Agent run)
]


def test_the_bench_has_45_distinct_cases():
    assert len(BENCH.CASES) == 45 and len(CASES) == 45
    assert set(SUBSET) <= set(CASES)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The cases' folder with the trained PPO+RND run (``trained/``) play and pretrained
    cases read."""
    folder = tmp_path_factory.mktemp("bad_inputs")
    train_run(folder / "trained", BENCH.TINY_RND)
    return str(folder)


@pytest.mark.parametrize("name", SUBSET)
def test_bad_input_is_one_line_exit_2_nothing_written(alf_cli, base, name):
    case = CASES[name]
    folder = BENCH.case_folder(base, case)
    args = BENCH.prepare(case, folder)
    root = os.path.join(folder, "run")
    before = BENCH.snapshot(root) if case.command == "play" else None
    p = alf_cli.run(f"alf.bin.{case.command}", args, folder)
    after = BENCH.snapshot(root) if os.path.isdir(root) else {}
    why = BENCH.judge(case, p.returncode, p.stderr, before, after)
    assert why == "", f"{name}: {why}\n{p.stderr[-2000:]}"
    shutil.rmtree(folder, ignore_errors=True)


def test_play_of_a_ppo_rnd_run_plays_from_the_eval_build(alf_cli, base):
    # play builds the Agent for evaluation only (PPO's actor, no value network, no RND
    # module: tests/algorithms/test_agent_eval_build.py) and loads the training checkpoint
    p = alf_cli.run("alf.bin.play", ["--root_dir=trained", "--num_episodes=2"], base)
    assert p.returncode == 0, p.stderr
    assert re.findall(r"^episode (\d+): return", p.stdout, re.M) == ["1", "2"], p.stdout
    assert "Traceback" not in p.stderr
