"""Same seed -> identical run (progress.csv and final parameters); other seed -> different."""
import csv
import os

import pytest
import torch

from alf import nest

# TINY_PPO / TINY_A2C are in tests/conftest.py (reached through the alf_cli fixture).
CASES = ["TINY_PPO",  # off-policy whole-replay-buffer path
         "TINY_A2C"]  # on-policy path


def _snapshot(trainer):
    """Every tensor of ``algorithm.state_dict()`` (optimizer state included), cloned."""
    flat = nest.flatten_with_paths(trainer.algorithm.state_dict())
    return {path: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for path, v in flat}


def _progress(root_dir):
    """progress.csv rows without the wall-clock columns."""
    with open(os.path.join(root_dir, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k not in ("wall_time_s", "fps")} for r in rows]


def _run(make_trainer, conf_text, root_dir, seed):
    trainer = make_trainer(root_dir, conf_text, [f"TrainerConfig.random_seed={seed}"])
    trainer.run()
    assert trainer.context.iteration == 6
    return _snapshot(trainer), _progress(root_dir)


def _equal(a, b):
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("conf", CASES)
def test_same_seed_same_run_other_seed_differs(make_trainer, alf_cli, tmp_path, conf):
    text = getattr(alf_cli, conf).replace("num_iterations = 4", "num_iterations = 6")
    params_a, progress_a = _run(make_trainer, text, tmp_path / "a", seed=3)
    params_b, progress_b = _run(make_trainer, text, tmp_path / "b", seed=3)
    params_c, progress_c = _run(make_trainer, text, tmp_path / "c", seed=4)

    # identical learning curve, row for row (one row per iteration: summary_interval=1)
    assert [int(r["iteration"]) for r in progress_a] == list(range(1, 7))
    assert progress_a == progress_b
    assert any(r["average_return"] for r in progress_a), "no episode finished: test too small"

    # identical parameters and optimizer state, bit for bit
    assert params_a.keys() == params_b.keys()
    weights = [k for k, v in params_a.items() if isinstance(v, torch.Tensor) and "weight" in k]
    assert weights, sorted(params_a)
    adam_steps = [k for k in params_a if k.endswith("step")]
    assert adam_steps, "optimizer state missing from state_dict()"
    for k in params_a:
        assert _equal(params_a[k], params_b[k]), f"{k} differs between two runs with seed 3"

    # another seed: different weights (and a different curve)
    assert any(not torch.equal(params_a[k], params_c[k]) for k in weights)
    assert progress_a != progress_c
