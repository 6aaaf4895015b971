"""The write-ahead log's format: records written are read back in order; a damaged record is a torn
tail only at the very end; segments of the previous format (zlib's CRC-32, magic WSWAL01) are still
read, and the log goes on from them in a segment of the current format (CRC-32C)."""
from __future__ import annotations

import os
import struct
import zlib

import pytest

from windowstore.server import wal


def _log(directory, payloads: list[bytes]) -> wal.WriteAheadLog:
    log = wal.WriteAheadLog(str(directory), "off")
    for p in payloads:
        log.append(p[:3], p[3:])  # a record's payload may come in parts
        log.flush()
    return log


def _as_v1(path: str) -> None:
    """Rewrite a current segment in the previous format: its magic, and every record's zlib CRC-32."""
    data = bytearray(open(path, "rb").read())
    assert data[:8] == wal.MAGIC
    data[:8] = wal.MAGIC_V1
    off = 8
    while off < len(data):
        n, _, lsn = struct.unpack_from("<IIQ", data, off)
        crc = zlib.crc32(bytes(data[off + 16: off + 16 + n]), zlib.crc32(struct.pack("<Q", lsn)))
        struct.pack_into("<I", data, off + 4, crc)
        off += 16 + n
    with open(path, "wb") as f:
        f.write(data)


def _one_segment(directory, previous_format: bool) -> wal.Segment:
    """The PAYLOADS logged into one segment, in the current or the previous format."""
    _log(directory, PAYLOADS).close()
    (seg,) = wal.segments(str(directory))
    if previous_format:
        _as_v1(seg.path)
    return seg


def _records(directory) -> list[tuple[int, bytes]]:
    return [(lsn, bytes(p)) for lsn, p in wal.read(str(directory))]


PAYLOADS = [b"first record", b"second", b"x" * 100_000, b"last one"]


def test_records_are_read_back_in_order_with_crc32c(tmp_path):
    _log(tmp_path, PAYLOADS).close()
    (seg,) = wal.segments(str(tmp_path))
    assert open(seg.path, "rb").read(8) == wal.MAGIC
    assert _records(tmp_path) == list(enumerate(PAYLOADS, 1))
    # the stored checksum is CRC-32C of the lsn and the payload
    n, crc, lsn = struct.unpack_from("<IIQ", open(seg.path, "rb").read(), 8)
    assert (n, lsn) == (len(PAYLOADS[0]), 1)
    assert crc == wal.crc32c(PAYLOADS[0], wal.crc32c(struct.pack("<Q", 1))) != zlib.crc32(PAYLOADS[0], zlib.crc32(struct.pack("<Q", 1)))


def test_a_segment_of_the_previous_format_is_read_and_the_log_goes_on_after_it(tmp_path):
    _log(tmp_path, PAYLOADS).close()
    (seg,) = wal.segments(str(tmp_path))
    _as_v1(seg.path)
    assert _records(tmp_path) == list(enumerate(PAYLOADS, 1))
    log = wal.WriteAheadLog(str(tmp_path), "off")
    assert list(log.recover()) and log.next_lsn == len(PAYLOADS) + 1
    log.append(b"after the upgrade")
    log.flush()
    log.close()
    old, new = wal.segments(str(tmp_path))
    assert open(old.path, "rb").read(8) == wal.MAGIC_V1 and open(new.path, "rb").read(8) == wal.MAGIC
    assert _records(tmp_path) == list(enumerate(PAYLOADS + [b"after the upgrade"], 1))


@pytest.mark.parametrize("previous_format", [False, True])
def test_damage_is_found_by_the_segment_s_own_checksum(tmp_path, previous_format):
    seg = _one_segment(tmp_path, previous_format)
    data = bytearray(open(seg.path, "rb").read())
    middle = 8 + 16 + len(PAYLOADS[0]) + 16 + 2  # inside the second record's payload
    data[middle] ^= 0x40
    open(seg.path, "wb").write(data)
    with pytest.raises(wal.WalCorrupt, match=r"offset \d+: damaged record \(lsn 2: checksum mismatch\)"):
        _records(tmp_path)


@pytest.mark.parametrize("previous_format", [False, True])
def test_a_torn_last_record_is_truncated(tmp_path, previous_format):
    seg = _one_segment(tmp_path, previous_format)
    size = os.path.getsize(seg.path)
    os.truncate(seg.path, size - 3)
    assert _records(tmp_path) == list(enumerate(PAYLOADS[:-1], 1))
    assert os.path.getsize(seg.path) == size - 16 - len(PAYLOADS[-1])


def test_the_fsync_policy_is_an_enum_with_the_cli_s_spellings(tmp_path):
    """--fsync's values are wal.Fsync's; a plain string becomes its member, an unknown one is
    refused naming the choices."""
    assert [f.value for f in wal.Fsync] == ["always", "interval", "off"]
    log = wal.WriteAheadLog(str(tmp_path / "a"), "interval")
    assert log.policy is wal.Fsync.INTERVAL and log.policy == "interval"
    log.close()
    with pytest.raises(ValueError, match="fsync policy is one of always, interval, off"):
        wal.WriteAheadLog(str(tmp_path / "b"), "sometimes")
