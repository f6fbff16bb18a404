"""Log records reach the console as alf's own lines (``[alf] ...``, ``[alf] warning: ...``),
not absl's ``I1125 15:47:59.864881 1404 replay_buffer.py:104] ...`` debug format."""
import logging
import re

from alf.bin.log_lines import AlfLogFormatter

ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ", re.M)


def test_a_replay_run_prints_its_buffer_as_an_alf_line(alf_cli, tmp_path):
    run = alf_cli.run("alf.bin.train", ["--conf=dqn_cart_pole.gin", "--root_dir=runs/dqn",
                                        "--conf_param", "TrainerConfig.num_iterations=2",
                                        "--conf_param", "TrainerConfig.num_env_steps=0",
                                        "--conf_param", "TrainerConfig.initial_collect_steps=64",
                                        "--conf_param", "TrainerConfig.num_updates_per_train_iter=1"],
                      tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not ABSL_PREFIX.search(run.stderr), run.stderr
    lines = run.stderr.splitlines()
    buffer = [l for l in lines if "ReplayBuffer" in l]
    assert buffer == ["[alf] ReplayBuffer: 1 env x 100,000 steps, 3.4 MiB on cpu"], lines
    # the whole output: the buffer, 2 progress lines, the checkpoint
    assert len(lines) == 4, lines
    assert all(l.startswith("[alf] ") for l in lines), lines


def test_levels_become_alf_prefixes():
    fmt = AlfLogFormatter()

    def line(level, msg, *args):
        return fmt.format(logging.LogRecord("alf", level, "x.py", 1, msg, args, None))

    assert line(logging.INFO, "offline buffer: %d steps", 5) == "[alf] offline buffer: 5 steps"
    assert line(logging.WARNING, "Checkpoint %s is unreadable", "c.pt") == \
        "[alf] warning: Checkpoint c.pt is unreadable"
    assert line(logging.ERROR, "boom") == "[alf] error: boom"
