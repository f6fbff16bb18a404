"""bench/summary_cost.py runs (a smoke run: the timings themselves are taken on a quiet
machine) and reports the three modes of each case, from runs that did the same work."""
import importlib.util
import json
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bench():
    spec = importlib.util.spec_from_file_location(
        "summary_cost", os.path.join(REPO_ROOT, "bench", "summary_cost.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_summary_cost_smoke_run(tmp_path, capsys):
    bench = _bench()
    out = tmp_path / "cost.json"
    results = bench.main(["--cases", "ppo", "--iterations", "2", "--warmup", "1",
                          "--repeats", "1", "--out", str(out),
                          "--conf_param", "create_environment.num_parallel_environments=2",
                          "--conf_param", "TrainerConfig.unroll_length=8",
                          "--conf_param", "TrainerConfig.mini_batch_size=8",
                          "--conf_param", "TrainerConfig.num_updates_per_train_iter=1"])
    (r,) = results
    assert r["case"] == "ppo" and set(r["ms_per_iteration"]) == {"every", "default", "never"}
    assert all(v > 0 for v in r["ms_per_iteration"].values())
    assert r["summarised_iteration_ms"] == r["ms_per_iteration"]["every"] - \
        r["ms_per_iteration"]["never"]
    assert json.loads(out.read_text())[0]["case"] == "ppo"
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].split()[:4] == ["case", "every", "ms", "default"] and len(table) == 2


def test_summary_modes_write_as_named(tmp_path):
    """``every`` summarises each iteration, ``default`` at the config's interval, ``never``
    has no writer."""
    import gin
    bench = _bench()
    conf, params = bench.CASES["ppo"]
    for mode, interval in (("every", 1), ("default", 5), ("never", None)):
        gin.clear_config()
        built = bench.build(conf, params + ["create_environment.num_parallel_environments=2"],
                            mode, 100, str(tmp_path / mode))
        ctx = built.learner.context
        try:
            assert (ctx.summary_writer is None) == (interval is None)
            if interval is not None:
                assert ctx.summary_interval == interval and not ctx.summarize_first_interval
        finally:
            if ctx.summary_writer is not None:
                ctx.summary_writer.close()
            built.env.close()
            gin.clear_config()
