"""The collectives alf builds on, with two real gloo ranks (processes)."""
import os
import traceback

import torch
import torch.multiprocessing as mp


def _two_rank_checks(rank: int, init_file: str, out_dir: str) -> None:
    try:
        torch.set_num_threads(1)
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                world_size=2)
        from alf.algorithms.data_transformers import ObservationNormalizer
        from alf.distributed import DataParallel, RankGroup
        from alf.distributed.state_sync import average_gradients, broadcast_state, find_drift
        from alf.tensor_specs import TensorSpec
        group = RankGroup.from_process_group(rank)
        results = {"peers": [(p.rank, p.pid) for p in group.peers.peers], "pid": os.getpid()}

        # gradients: the mean over ranks; a missing gradient counts as zero, and a
        # parameter without gradient on every rank keeps grad None
        a = torch.nn.Parameter(torch.zeros(3))
        b = torch.nn.Parameter(torch.zeros(2))
        c = torch.nn.Parameter(torch.zeros(1))
        a.grad = torch.full((3,), float(rank + 1))            # 1 and 2 -> 1.5
        b.grad = torch.tensor([4.0, 8.0]) if rank == 1 else None  # -> [2, 4]
        average_gradients(group, [a, b, c])
        results["grads"] = (a.grad.clone(), b.grad.clone(), c.grad)

        # initial broadcast: rank 1's module becomes rank 0's
        torch.manual_seed(rank)
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
        m[1].running_mean.fill_(float(rank))
        broadcast_state(group, m)
        results["state"] = {k: v.clone() for k, v in m.state_dict().items()}
        results["drift_none"] = find_drift(group, m)
        # one bit of one weight on rank 1: found and named
        if rank == 1:
            w = m[0].weight.data.view(-1).view(torch.int32)
            w[5] ^= 1
        results["drift_one_bit"] = find_drift(group, m)
        # the periodic check copies rank 0's state over, naming what drifted (rank 0 warns)
        from alf.trainers.data_parallel_trainer import check_drift
        notices = []
        check_drift(group, m, "resync", notices.append)
        results["notices"] = notices
        results["drift_after_resync"] = find_drift(group, m)

        # normaliser statistics: merged over ranks, identically, after each unroll
        spec = TensorSpec((2,), torch.float32)
        norm = ObservationNormalizer(spec)
        sync = DataParallel(group, norm, unroller=None)
        from alf.data_structures import TimeStep
        obs = torch.arange(8, dtype=torch.float32).reshape(4, 2) * (rank + 1)
        norm.transform_timestep(TimeStep(observation=obs), ())
        steps = sync.after_unroll(local_steps=4 + rank)
        results["steps"] = steps
        results["moments"] = norm.normalizer.moments()
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
        group.close(completed=True)  # waits for both ranks; the group is this test's:
        dist.destroy_process_group()  # a live gloo group aborts the process at exit
    except BaseException:
        with open(os.path.join(out_dir, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise


def test_gradient_mean_broadcast_drift_and_statistics_over_two_ranks(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_two_rank_checks, args=(r, str(tmp_path / "init"), str(tmp_path)))
             for r in range(2)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(120)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    for r in range(2):
        err = tmp_path / f"rank{r}.err"
        assert not err.exists(), err.read_text()
        assert procs[r].exitcode == 0
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2))
    assert r0["peers"] == r1["peers"] == [(0, r0["pid"]), (1, r1["pid"])]
    for res in (r0, r1):
        ga, gb, gc = res["grads"]
        assert torch.equal(ga, torch.full((3,), 1.5))
        assert torch.equal(gb, torch.tensor([2.0, 4.0]))
        assert gc is None
        assert res["drift_none"] == []
        assert res["drift_one_bit"] == [("0.weight", [1])]
        assert res["drift_after_resync"] == []
        assert len(res["notices"]) == 1 and "0.weight (rank 1)" in res["notices"][0]
        assert res["steps"] == 9
    for k, v in r0["state"].items():
        assert torch.equal(v, r1["state"][k]), k
    assert torch.equal(r1["state"]["1.running_mean"], torch.zeros(4))
    # the merged moments are those of both ranks' 4 + 4 observations
    both = torch.cat([torch.arange(8, dtype=torch.float64).reshape(4, 2) * k for k in (1, 2)])
    for res in (r0, r1):
        m = res["moments"]["."] if "." in res["moments"] else next(iter(res["moments"].values()))
        assert float(m["count"]) == 8
        assert torch.allclose(m["mean"], both.mean(0))
        assert torch.allclose(m["var"], both.var(0, unbiased=False))
    assert all(torch.equal(r0["moments"][k][f], r1["moments"][k][f])
               for k in r0["moments"] for f in ("count", "mean", "var"))


def test_rank0_errors_reach_other_ranks_as_the_same_kind():
    """An exception gin wraps in an unpicklable class travels as its built-in base class,
    so every rank maps it to the same one-line exit (ValueError, not a traceback)."""
    import pickle

    from alf.distributed.rank_group import _picklable
    from alf.errors import ConfigError

    class Unpicklable(ValueError):
        def __reduce__(self):
            raise TypeError("cannot pickle")

    e = _picklable(Unpicklable("TrainerConfig.num_iterations: 'many' is not a number"))
    assert type(e) is ValueError and "many" in str(e)
    pickle.dumps(e)
    kept = ConfigError("typo")
    assert _picklable(kept) is kept
