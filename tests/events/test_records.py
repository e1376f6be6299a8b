"""``RecordWriter``: TFRecords over a binary file object, checked by TensorBoard's own
CRC (an independent implementation), with no file system involved."""

from __future__ import annotations

import io
import struct

from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

from mindwatch.events.records import FOOTER_SIZE, HEADER_SIZE, RecordWriter, frame


def records_in(data: bytes) -> list[bytes]:
    """Each record's data, every length and CRC checked."""
    found, offset = [], 0
    while offset < len(data):
        header = data[offset : offset + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[offset + 8 : offset + HEADER_SIZE])
        assert header_crc == masked_crc32c(header)
        body = data[offset + HEADER_SIZE : offset + HEADER_SIZE + length]
        end = offset + HEADER_SIZE + length
        (body_crc,) = struct.unpack("<I", data[end : end + FOOTER_SIZE])
        assert body_crc == masked_crc32c(body)
        found.append(body)
        offset = end + FOOTER_SIZE
    return found


def test_records_written_one_by_one_or_framed_in_a_batch_read_back_and_are_counted() -> None:
    buffer = io.BytesIO()
    out = RecordWriter(buffer)
    out.write(b"first")
    out.write_framed([frame(b"second"), frame(b""), frame(bytes(range(256)) * 40)])
    out.write_framed([frame(b"alone")])
    out.write_framed([])
    out.flush()
    data = buffer.getvalue()
    assert records_in(data) == [b"first", b"second", b"", bytes(range(256)) * 40, b"alone"]
    assert out.size == len(data)
    out.close()
    assert buffer.closed
