"""The run's TensorBoard writer checksums events in C and queues a summarised
iteration's events without waiting, and the events file is still exactly TensorBoard's
format: every record's CRCs verify with TensorBoard's own (pure-Python) function and its
reader gets every scalar back."""
import os
import struct

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
from tensorboard.summary.writer import record_writer

from alf.trainers import event_file_speed
from alf.trainers.summary_writer import open_summary_writer


def _records(path):
    """(header, header crc, data, data crc) of each TFRecord in ``path``."""
    with open(path, "rb") as f:
        raw = f.read()
    out, i = [], 0
    while i < len(raw):
        header = raw[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", raw[i + 8:i + 12])
        data = raw[i + 12:i + 12 + length]
        (data_crc,) = struct.unpack("<I", raw[i + 12 + length:i + 16 + length])
        out.append((header, header_crc, data, data_crc))
        i += 16 + length
    return out


def test_the_native_crc_is_tensorboards_crc():
    assert event_file_speed.use_native_crc()
    assert record_writer.masked_crc32c is not pywrap_tensorflow.masked_crc32c
    for data in (b"", b"a", bytes(range(256)), os.urandom(1000), b"x" * 61):
        assert record_writer.masked_crc32c(data) == pywrap_tensorflow.masked_crc32c(data)


def test_events_written_by_the_run_writer_verify_and_read_back(tmp_path):
    writer = open_summary_writer(str(tmp_path))
    assert writer._writer.file_writer.event_writer._async_writer._byte_queue.maxsize == \
        event_file_speed.EVENT_QUEUE_SIZE
    for step in range(300):  # more events than the queue TensorBoard has by default
        writer.add_scalar("Loss/ppo/loss", step * 0.5, step)
    writer.close()
    records = _records(writer.path)
    assert len(records) == 301  # the file-version event, then one per scalar
    for header, header_crc, data, data_crc in records:
        assert header_crc == pywrap_tensorflow.masked_crc32c(header)
        assert data_crc == pywrap_tensorflow.masked_crc32c(data)
    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    events.Reload()
    points = events.Scalars("Loss/ppo/loss")
    assert [p.step for p in points] == list(range(300))
    assert [p.value for p in points] == [s * 0.5 for s in range(300)]
