"""Make TensorBoard's event writing cheap enough for alf's per-iteration summaries.

Without TensorFlow, ``tensorboard``'s record writer checksums every event with a
pure-Python CRC-32C (``tensorboard.compat.tensorflow_stub.pywrap_tensorflow``: a loop
over each byte, ~35 us for a 60-byte scalar event), in the writer's background thread,
and ``SummaryWriter``'s queue holds only 10 events: a summarised PPO iteration writes
~50 scalars, so the training thread blocked on the full queue while that thread
checksummed, and a summarised ``ppo_cart_pole.gin`` iteration cost +34% (measured:
docs/benchmarks.md, "TensorBoard summaries: cost per iteration"). Two changes, neither
altering a byte of the events file:

- :func:`use_native_crc` points the record writer at ``google_crc32c`` (Google's C
  implementation, a dependency of alf), checked against TensorBoard's own function on a
  fixed input first (if they ever disagree, TensorBoard's stays);
- :data:`EVENT_QUEUE_SIZE` events may wait for the writer thread, so a summarised
  iteration hands its events over without waiting for each to be written.
"""
import threading

#: events queued for TensorBoard's writer thread before ``add_scalar`` waits (its default
#: is 10; a summarised iteration writes ~20-120 scalars, each also against env steps)
EVENT_QUEUE_SIZE = 1000

_lock = threading.Lock()
_installed = False
_PROBE = bytes(range(256)) * 3


def _masked(crc: int) -> int:
    """TFRecord's masked CRC (the same rotation and constant as TensorBoard's)."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def use_native_crc() -> bool:
    """Make TensorBoard's record writer checksum with ``google_crc32c``; whether it now
    does (False when the package is missing or disagrees with TensorBoard's own)."""
    global _installed
    with _lock:
        if _installed:
            return True
        try:
            import google_crc32c
            from tensorboard.summary.writer import record_writer
        except ImportError:
            return False

        def masked_crc32c(data: bytes) -> int:
            return _masked(google_crc32c.value(bytes(data)))

        if masked_crc32c(_PROBE) != record_writer.masked_crc32c(_PROBE):
            return False
        record_writer.masked_crc32c = masked_crc32c
        _installed = True
        return True
