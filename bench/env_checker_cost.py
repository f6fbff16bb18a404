"""What alf's environment checks cost (issue 41, item 3): the start-up check of one copy of
the env (:mod:`alf.environments.env_checker`), and the per-step NaN/inf check of the
observations and rewards (:mod:`alf.environments.value_check`).

    python bench/env_checker_cost.py                    # ~20 s
    python bench/env_checker_cost.py --repeats 20 --calls 20000

Start: ``check_environment`` (build one copy, one reset and one step bare and through its
wrappers, close it) per env id, the median of ``--repeats`` (the per-process memo cleared
each time), beside the median of ``create_environment(..., check_env=False)`` of the
same request with 8 envs (what the run builds anyway). Per step: ``FiniteValueCheck.step``
on a batch of 8 envs' arrays as the vector env returns them (median of 5 blocks of
``--calls`` calls, per call), beside the median of ``GymVectorEnvironment.step`` with the
check off, for the same id (interleaved blocks, on and off). Ids whose package is missing
are skipped. Writes ``bench/results/env_checker_cost.json``.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

ENVS = ("CartPole-v1", "Pendulum-v1", "HalfCheetah-v5", "ALE/Pong-v5")
NUM_ENVS = 8


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def start_cost(env_name: str, repeats: int) -> dict:
    """Seconds of the start-up check and of building the run's env without it."""
    from alf.environments import env_checker, factory
    from alf.environments.env_ids import find_env_spec

    # the request create_environment checks (Atari ids: the gin-default preprocessing)
    atari, max_steps = factory._resolve_atari(  # pylint: disable=protected-access
        env_name, find_env_spec(env_name), None, None)
    request = factory._request(env_name, NUM_ENVS, 0, None, (), None,  # pylint: disable=protected-access
                               max_steps, atari, 0, None)

    def check():
        env_checker._checked.clear()  # pylint: disable=protected-access
        env_checker.check_environment(request)

    def build():
        factory.create_environment(env_name=env_name, num_parallel_environments=NUM_ENVS,
                                   check_env=False).close()
    return {"check_s": _median_time(check, repeats), "build_8_envs_s": _median_time(build, repeats)}


def step_cost(env_name: str, calls: int) -> dict:
    """Microseconds per call of the value check, and of the env's step without it."""
    import numpy as np
    import torch
    from alf.environments import factory
    from alf.environments.value_check import FiniteValueCheck

    env = factory.create_environment(env_name=env_name, num_parallel_environments=NUM_ENVS,
                                     check_env=False, check_values=False)
    env.reset()
    space = env.gym_env.single_observation_space
    obs, reward, *_ = env.gym_env.step(env.gym_env.action_space.sample())
    reward = np.asarray(reward, np.float32)
    check = FiniteValueCheck(env_name, space, NUM_ENVS)
    spec = env.action_spec()
    action = torch.from_numpy(np.stack([env.gym_env.single_action_space.sample()
                                        for _ in range(NUM_ENVS)])).to(spec.dtype)
    blocks_check, blocks_step = [], []
    step_calls = max(calls // 20, 50)
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            check.step(obs, reward)
        blocks_check.append((time.perf_counter() - start) / calls * 1e6)
        start = time.perf_counter()
        for _ in range(step_calls):
            env.step(action)
        blocks_step.append((time.perf_counter() - start) / step_calls * 1e6)
    env.close()
    return {"check_us_per_step": statistics.median(blocks_check),
            "env_step_us": statistics.median(blocks_step),
            "float_observation_leaves": len(check._leaves)}  # pylint: disable=protected-access


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(1)
    results = {}
    for env_name in ENVS:
        try:
            results[env_name] = {**start_cost(env_name, args.repeats),
                                 **step_cost(env_name, args.calls)}
        except Exception as e:  # noqa: BLE001 - a missing optional package: skip the id
            print(f"{env_name}: skipped ({type(e).__name__}: {e})")
            continue
        r = results[env_name]
        print(f"{env_name:16s} start check {r['check_s'] * 1e3:7.1f} ms (building 8 envs: "
              f"{r['build_8_envs_s'] * 1e3:7.1f} ms) | value check {r['check_us_per_step']:5.2f} "
              f"us/step (env step of 8: {r['env_step_us']:8.1f} us)")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "env_checker_cost.json"), "w") as f:
        json.dump({"num_envs": NUM_ENVS, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
