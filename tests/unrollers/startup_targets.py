"""Stand-in worker entry points for the start-up tests (module level: spawn pickles
them by name)."""
import time


def slow_but_busy(spec, conn, seconds):
    """Burn the CPU for ``seconds`` (a start-up on a busy machine), then report ready."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(10000))
    conn.send(("ready",))
    time.sleep(60)


def hung(spec, conn, seconds):
    """Never report ready and never use the CPU."""
    time.sleep(60)
