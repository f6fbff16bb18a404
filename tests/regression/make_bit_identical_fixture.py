"""Write ``tests/regression/fixtures/bit_identical.json``: the digests of every case of
``bit_identical_cases.py`` (run ``test_bit_identical.py`` to compare against it).

Generate from a checkout of the code whose numbers are the reference (e.g. a
``git worktree`` of the commit before a refactor), importing alf from that checkout::

    cd /path/to/checkout && PYTHONPATH=$PWD python tests/regression/make_bit_identical_fixture.py

Options: ``--cases a b`` regenerates only those cases (the others are kept from the
existing file); ``--out PATH`` writes elsewhere; ``--compare PATH`` writes nothing and
reports every case that differs from the fixture at PATH (a determinism check: generate
twice and compare).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import bit_identical_cases as bic


def _check(name):
    """The final checkpoint holds the live algorithm state, optimizer state included."""
    def check(trainer, digests):
        live = bic.flat_digests(trainer.algorithm.state_dict(), "algorithm")
        saved = {k: v for k, v in digests.items() if k.startswith("algorithm/")}
        assert live == saved, (name, bic.differences(saved, live))
        num_optimizers = len(trainer.algorithm.optimizers())
        assert num_optimizers > 0, name
        paths = bic.optimizer_paths(digests)
        for i in range(num_optimizers):
            prefix = f"algorithm/_extra_state/optimizers/{i}/state/"
            assert any(p.startswith(prefix) for p in paths), (
                f"{name}: optimizer {i} has no state in the checkpoint (no update?)")
    return check


def generate(names, quiet=False):
    """``(datasets, cases)`` digests of ``names``, computed in one temporary directory."""
    import alf
    if not quiet:
        print(f"alf from {os.path.dirname(alf.__file__)}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bit_identical_") as work:
        datasets = bic.make_datasets(os.path.join(work, "data"))
        dataset_digests = {n: bic.dataset_digests(p) for n, p in datasets.items()}
        cases = {}
        for name in names:
            t0 = time.perf_counter()
            cases[name] = bic.run_case(name, work, datasets, check=_check(name))
            if not quiet:
                print(f"{name:24s} {time.perf_counter() - t0:6.2f} s  "
                      f"{len(cases[name])} entries", file=sys.stderr, flush=True)
    return dataset_digests, cases


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=None, choices=list(bic.CASES))
    parser.add_argument("--out", default=bic.FIXTURE)
    parser.add_argument("--compare", default=None)
    args = parser.parse_args(argv)
    names = args.cases or list(bic.CASES)
    datasets, cases = generate(names)

    if args.compare:
        with open(args.compare) as f:
            ref = json.load(f)
        bad = 0
        for kind, got in (("datasets", datasets), ("cases", cases)):
            for name, digests in got.items():
                diff = bic.differences(ref[kind].get(name, {}), digests)
                if diff:
                    bad += 1
                    print(f"DIFFERS {kind}/{name}:\n  " + "\n  ".join(diff))
        env = bic.environment()
        if env != ref["environment"]:
            print(f"note: environment {env} vs {ref['environment']}")
        print(f"{bad} of {len(datasets) + len(cases)} differ from {args.compare}")
        return 1 if bad else 0

    old = {}
    if args.cases and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        if old.get("environment") != bic.environment():
            parser.error(f"{args.out} was made on {old.get('environment')}, this is "
                         f"{bic.environment()}: regenerate every case")
    fixture = {
        "about": "SHA-256 of every tensor (dtype, shape, raw bytes) and '=' + repr of every "
                 "plain value in the final checkpoint of each case of bit_identical_cases.py; "
                 "written by make_bit_identical_fixture.py",
        "environment": bic.environment(),
        "datasets": datasets,
        "cases": {n: (cases[n] if n in cases else old["cases"][n]) for n in bic.CASES
                  if n in cases or n in old.get("cases", {})},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {len(fixture['cases'])} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
