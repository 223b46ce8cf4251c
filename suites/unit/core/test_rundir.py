"""harness.core.rundir (and the torn-line rule of harness.core.records): every record file of a run directory is
read whole before ``--resume`` or a baseline check works on it; what cannot be trusted is refused naming the file
(and line), what the campaign can repair is said in a note."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from harness.core.cases import Case
from harness.core.corpus_files import write_corpus
from harness.core.errors import InvalidArgument
from harness.core.records import TaskRecord, _parse_line, read_tasks, repair_jsonl
from harness.core.rundir import check_baseline, check_resume, corpus_stamp, npz_sound

SUBJECT = "chainer.embed_id"
DEEP = b'{"key": ' + b"[" * 5000 + b"]" * 5000 + b"}"
CASES = [Case("embed", s, {"vocab": 5, "width": 3, "ids_shape": [4]}) for s in range(3)]


def jsonl_line(rec: TaskRecord) -> str:
    return json.dumps(rec.to_dict(), sort_keys=True) + "\n"  # as the campaign writes a task line


def _rec(c: Case, i: int) -> TaskRecord:
    return TaskRecord(key=f"{c.id}|{SUBJECT}|cpu|default", case_id=c.id, family="embed", subject=SUBJECT,
                      device="cpu", context="default", status="ok", runs=1, ok_runs=1, array_file=f"t{i}.npz")


@pytest.fixture
def run(tmp_path):
    """A finished run directory of three tasks (records gzipped as a finished report leaves them)."""
    d = tmp_path / "run"
    (d / "arrays").mkdir(parents=True)
    write_corpus(CASES, str(d / "corpus.jsonl"))
    meta = {"subjects": [SUBJECT], "devices": ["cpu"], "contexts": ["default"], "repeats": 1, "fresh": 0,
            "timeout": 60.0, "shard": None, "corpus": corpus_stamp(CASES)}
    (d / "campaign.json").write_text(json.dumps(meta))
    (d / "environment.json").write_text(json.dumps({"python": "3.12", "problems": []}))
    recs = [_rec(c, i) for i, c in enumerate(CASES)]
    (d / "tasks.jsonl.gz").write_bytes(gzip.compress("".join(jsonl_line(r) for r in recs).encode()))
    (d / "runs.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps({"key": r.key}) + "\n"
                                                            for r in recs).encode()))
    for i in range(3):
        np.savez(d / "arrays" / f"t{i}.npz", y=np.arange(10, dtype=np.float32) + i)
    return d


def _meta(d):
    return json.loads((d / "campaign.json").read_text())


def _plain_tasks(d) -> list[bytes]:
    data = gzip.decompress((d / "tasks.jsonl.gz").read_bytes())
    (d / "tasks.jsonl.gz").unlink()
    return data.split(b"\n")[:-1]


def test_a_sound_run_directory_has_no_notes(run) -> None:
    assert check_resume(str(run), _meta(run)) == []
    check_baseline(str(run))


# ---- the torn-line rule -----------------------------------------------------------------------
def test_every_prefix_of_a_record_line_is_torn_and_nothing_else_is() -> None:
    line = jsonl_line(_rec(CASES[0], 0)).strip().replace('"default"', '"d\\u00e9\\"\u00e9x"').encode()
    line = line[:-1] + b',"extra":[1.5e-3,-2,null,true,false,{"q":[]}]}'
    json.loads(line)
    assert all(_parse_line(line[:i])[0] == "torn" for i in range(1, len(line)))
    assert _parse_line(line)[0] == "ok"
    for bad in (DEEP, DEEP[:-3], b"{" * 5000, b'{"key":"\xff\xfe"}', b"{garbage", b'{"a":1}}', b'{"a":"\\q"}', b"[1]x"):
        assert _parse_line(bad)[0] == "bad", bad


@pytest.mark.parametrize("damage,where", [
    (lambda lines: lines[:1] + [b'{"key": "\xff\xfe not utf-8"}'] + lines[1:], ":2: not a record"),
    (lambda lines: lines[:1] + [DEEP] + lines[1:], ":2: not a record (nested too deep)"),
    (lambda lines: lines + [b"{garbage that was never a record"], ":4: not a record"),
])
def test_a_damaged_tasks_line_is_refused_naming_the_file_and_line(run, damage, where) -> None:
    lines = damage(_plain_tasks(run))
    (run / "tasks.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InvalidArgument, match=f"tasks.jsonl{where}".replace("(", r"\(").replace(")", r"\)")):
        check_resume(str(run), _meta(run))


def test_a_torn_line_is_said_and_its_task_reruns_once(run) -> None:
    lines = _plain_tasks(run)
    (run / "tasks.jsonl").write_bytes(b"\n".join([lines[0], lines[1][:40], lines[2]]) + b"\n")
    notes = check_resume(str(run), _meta(run))
    assert len(notes) == 1 and "tasks.jsonl:2: a line cut short" in notes[0]
    repair_jsonl(str(run / "tasks.jsonl"))
    assert sorted(read_tasks(str(run / "tasks.jsonl"))) == sorted([_rec(CASES[0], 0).key, _rec(CASES[2], 2).key])


# ---- gzip files cut or damaged ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tasks.jsonl.gz", "runs.jsonl.gz"])
def test_a_gzipped_record_file_cut_in_half_keeps_its_whole_lines(run, name) -> None:
    raw = (run / name).read_bytes()
    (run / name).write_bytes(raw[:len(raw) // 2])
    notes = check_resume(str(run), _meta(run))
    assert any(name in n and "cut short" in n for n in notes), notes
    repair_jsonl(str(run / name[:-3]))  # what the campaign does before it appends: no traceback, whole lines kept
    assert (run / name[:-3]).exists() and not (run / name).exists()


@pytest.mark.parametrize("name", ["tasks.jsonl.gz", "runs.jsonl.gz"])
def test_a_gzipped_record_file_with_a_bad_checksum_is_refused(run, name) -> None:
    raw = bytearray((run / name).read_bytes())
    raw[-6] ^= 0xFF  # the CRC-32 in the trailer
    (run / name).write_bytes(bytes(raw))
    with pytest.raises(InvalidArgument, match=f"{name}: not a readable gzip file"):
        check_resume(str(run), _meta(run))


# ---- the corpus and campaign.json ------------------------------------------------------------------
def test_a_corpus_with_a_case_removed_is_refused(run) -> None:
    write_corpus(CASES[:2], str(run / "corpus.jsonl"))
    with pytest.raises(InvalidArgument, match="corpus.jsonl holds 2 cases .* ran 3 .*not the corpus"):
        check_resume(str(run), _meta(run))


def test_a_task_of_a_case_the_corpus_lacks_is_refused(run) -> None:
    meta = _meta(run)
    del meta["corpus"]  # (a run directory written before campaign.json recorded its corpus)
    write_corpus(CASES[:2], str(run / "corpus.jsonl"))
    with pytest.raises(InvalidArgument, match=f"ran case {CASES[2].id}, which .* does not hold"):
        check_resume(str(run), meta)


def test_a_shard_past_its_count_is_refused(run) -> None:
    meta = {**_meta(run), "shard": "9/2"}
    with pytest.raises(InvalidArgument, match=r"campaign.json: shard='9/2' needs 1 <= i <= n"):
        check_resume(str(run), meta)


# ---- arrays -------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "flipped"])
def test_a_damaged_arrays_file_makes_its_task_rerun(run, damage) -> None:
    path = run / "arrays" / "t1.npz"
    raw = bytearray(path.read_bytes())
    if damage == "garbage":
        raw = bytearray(b"PK\x03\x04 this is not a zip")
    else:
        raw[len(raw) // 3] ^= 0xFF  # inside the member's data: the directory reads, the checksum fails
    path.write_bytes(bytes(raw))
    assert not npz_sound(str(path))
    notes = check_resume(str(run), _meta(run))
    assert any("t1.npz: damaged" in n and _rec(CASES[1], 1).key in n for n in notes), notes
    from harness.execute.campaign import arrays_complete

    assert not arrays_complete(str(run), _rec(CASES[1], 1)) and arrays_complete(str(run), _rec(CASES[0], 0))


# ---- baselines ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,text,match", [
    ("environment.json", "garbage", "environment.json.*not valid JSON"),
    ("environment.json", "[]", "environment.json: .* must be an object"),
    ("campaign.json", "[1, 2]", "campaign.json: .* must be an object"),
])
def test_a_baseline_whose_json_files_do_not_read_is_refused(run, name, text, match) -> None:
    (run / name).write_text(text)
    with pytest.raises(InvalidArgument, match=match):
        check_baseline(str(run))


def test_a_baseline_with_a_truncated_measures_file_is_refused_before_the_campaign(run) -> None:
    raw = gzip.compress(b'{"kind": "repeat"}\n' * 200)
    (run / "measures.jsonl.gz").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(InvalidArgument, match="measures.jsonl.gz.*a baseline must be a finished report"):
        check_baseline(str(run))


def test_a_baseline_with_a_damaged_arrays_file_is_refused(run) -> None:
    (run / "arrays" / "t2.npz").write_bytes(b"not a zip")
    with pytest.raises(InvalidArgument, match="t2.npz is damaged"):
        check_baseline(str(run))


def test_a_finished_task_whose_run_lines_are_missing_reruns(run) -> None:
    data = gzip.decompress((run / "runs.jsonl.gz").read_bytes()).split(b"\n")
    (run / "runs.jsonl.gz").write_bytes(gzip.compress(b"\n".join(data[:1] + data[2:])))
    notes = check_resume(str(run), _meta(run))
    assert any("lacks run lines of 1 finished task(s)" in n and _rec(CASES[1], 1).key in n for n in notes), notes
