"""A packed record file (``.xz``, or an older report's ``.gz``): found beside the plain name, read whole, read up
to a cut, refused when damaged."""

from __future__ import annotations

import gzip
import lzma

import pytest

from harness.core.errors import RecordError
from harness.core.record_files import (
    compress_jsonl,
    pack,
    raw_lines,
    record_file,
    record_lines,
    remove_packed,
    unpack_parts,
    unpack_record,
)
from harness.core.records import read_records, repair_jsonl

LINES = b"".join(b'{"key": "k%d", "n": %d}\n' % (i, i * i) for i in range(3000))


@pytest.fixture
def packed(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(LINES)
    assert compress_jsonl(str(path)) == str(path) + ".xz"
    return path


def test_a_packed_file_is_found_beside_its_plain_name_and_read_whole(packed) -> None:
    assert not packed.exists() and record_file(str(packed)) == str(packed) + ".xz"
    assert lzma.decompress((packed.parent / "tasks.jsonl.xz").read_bytes()) == LINES  # what xzcat reads
    assert "".join(record_lines(str(packed))).encode() == LINES
    assert [obj["n"] for _, obj in read_records(str(packed))][:3] == [0, 1, 4]


def test_packing_the_same_lines_gives_the_same_bytes() -> None:
    assert pack(LINES) == pack(LINES)


def test_a_packed_file_cut_in_half_reads_its_lines_up_to_the_cut(packed) -> None:
    xz = packed.parent / "tasks.jsonl.xz"
    raw = xz.read_bytes()
    xz.write_bytes(raw[:len(raw) // 2])
    data, cut = unpack_parts(str(xz))
    assert cut and 0 < len(data) < len(LINES) and LINES.startswith(data)
    assert raw_lines(str(packed))[:-1] == LINES.split(b"\n")[:len(raw_lines(str(packed))) - 1]
    with pytest.raises(RecordError, match="cut short"):
        unpack_record(str(xz))


@pytest.mark.parametrize("damage, needle", [
    (lambda raw: raw[:-6] + bytes([raw[-6] ^ 0xFF]) + raw[-5:], "not a readable xz file"),
    (lambda raw: raw[:len(raw) // 2] + bytes([raw[len(raw) // 2] ^ 0xFF]) + raw[len(raw) // 2 + 1:],
     "not a readable xz file"),
    (lambda raw: b"not xz", "not a readable xz file"),
    (lambda raw: raw + b"xx", "bytes after the end"),
], ids=["footer", "middle", "garbage", "trailing"])
def test_a_damaged_packed_file_is_refused(packed, damage, needle) -> None:
    xz = packed.parent / "tasks.jsonl.xz"
    xz.write_bytes(damage(xz.read_bytes()))
    with pytest.raises(RecordError, match=needle):
        unpack_parts(str(xz))


def test_an_older_reports_gzip_file_is_found_and_restored_plain(tmp_path) -> None:
    path = tmp_path / "runs.jsonl"
    (tmp_path / "runs.jsonl.gz").write_bytes(gzip.compress(LINES))
    assert record_file(str(path)) == str(path) + ".gz"
    assert "".join(record_lines(str(path))).encode() == LINES
    repair_jsonl(str(path))  # what a resume does first
    assert path.read_bytes() == LINES and not (tmp_path / "runs.jsonl.gz").exists()


def test_removing_the_packed_forms_leaves_the_plain_file(packed) -> None:
    packed.write_bytes(b"{}\n")
    (packed.parent / "tasks.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    remove_packed(str(packed))
    assert record_file(str(packed)) == str(packed) and not list(packed.parent.glob("tasks.jsonl.*"))
