"""bench/mcts_speed.py runs end to end at tiny sizes and times like with like: both
searches build the same trees with its MLP model."""
import importlib.util
import json
import os

import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bench():
    spec = importlib.util.spec_from_file_location(
        "mcts_speed", os.path.join(REPO_ROOT, "bench", "mcts_speed.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_run_writes_rows(tmp_path):
    out = tmp_path / "rows.json"
    threads = torch.get_num_threads()
    try:
        rows = _bench().main(["--batch_sizes", "1", "3", "--simulations", "4", "--repeats",
                              "1", "--hidden", "8", "--json", str(out)])
    finally:  # the script sets the thread count for its process
        torch.set_num_threads(threads)
    assert [r["batch"] for r in rows] == [1, 3]
    assert json.loads(out.read_text()) == rows
    for r in rows:
        assert r["batched_best"] > 0 and r["reference_best"] > 0
        assert r["same_trees"] == f"{r['batch']}/{r['batch']}"
