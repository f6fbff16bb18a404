"""Run ``python -m alf.bin.<command>`` invocations as forks of one process that has
already imported alf (torch, gymnasium, every configurable).

Why: the suite runs well over a hundred commands (``alf_cli.run`` and the docs test's
~60); as fresh interpreters each spends ~2.5 s of CPU importing torch and alf before
doing a second of work, more than the 2-core CI machine can afford. A fork starts in
~10 ms with those modules loaded and then runs the command's module as ``__main__``
exactly as ``python -m`` does (``sys.argv``, ``sys.path[0]`` = the working directory,
the environment, its own session so a timeout kills it and every process it started),
in a separate process with its own exit status. Nothing of alf's is run before the
fork (no config parsed, no absl flag defined, no torch op, so no OpenMP pool), so each
command starts from the state a fresh interpreter would have after ``import alf``
(plus ``torch._dynamo``, which torch imports on a process's first optimizer anyway:
another ~1.2 s of CPU saved per training command).

What a fork cannot reproduce, and how the client keeps the tests honest about it:
- output printed while importing (a warning a fresh interpreter would print in every
  command): the server reports what the imports printed, and the client falls back to
  fresh interpreters when it is not empty (a test then sees the extra line);
- environment variables native libraries read when they load (``OMP_*``, ``GOMP_*``,
  ``MKL_*``, ``LD_*``, ``PYTHON*``): a request that changes one runs as a fresh
  interpreter (``fork_client.needs_fresh_interpreter``).

Protocol (one JSON object per line): the server first answers ``{"import_output": ...}``;
then the client writes ``{"module", "args", "cwd", "env", "out", "err"}`` (``err``
null: stderr goes to ``out`` too); the server answers ``{"pid": ...}`` at once and
``{"status": ...}`` when the command has exited.
"""
import atexit
import json
import os
import runpy
import sys
import tempfile
import traceback


def _child(request: dict) -> int:
    """In the forked child: become the command and return its exit status."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)  # not the server's request pipe
    os.dup2(null, 0)
    os.close(null)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = out if not request.get("err") else \
        os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    if err != out:
        os.close(err)
    sys.argv = [request["module"]] + list(request["args"])
    # what `python -m module args` would have been started with (run provenance reads it)
    sys.orig_argv = [sys.executable, "-m", request["module"]] + list(request["args"])
    sys.path[0] = os.getcwd()  # as `python -m` (the server's own folder is not there)
    status = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException:  # what an uncaught exception does to an interpreter
        traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return status


def _import_alf() -> str:
    """Import what every command imports; returns what that printed (fd 1 and 2)."""
    with tempfile.TemporaryFile(mode="w+") as captured:
        saved = os.dup(1), os.dup(2)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(captured.fileno(), 1)
        os.dup2(captured.fileno(), 2)
        try:
            import alf  # noqa: F401  (the point: imported once, before any fork)
            # torch imports torch._dynamo on the first optimizer a process builds
            # (Optimizer.add_param_group is wrapped in torch._disable_dynamo): ~1.2 s of
            # CPU in every training command; importing a module changes no state a
            # command sees (no thread, no config), so the forks share it
            import torch._dynamo  # noqa: F401
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        captured.seek(0)
        return captured.read()


def main() -> None:
    print(json.dumps({"import_output": _import_alf()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(request))
        print(json.dumps({"pid": pid}), flush=True)
        _, wait_status = os.waitpid(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(wait_status)}), flush=True)


if __name__ == "__main__":
    main()
