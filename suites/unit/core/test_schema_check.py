"""One input vocabulary: each drift that main accepted silently, or ended in a traceback, is refused in one line.

- a report directory (its records gzipped) is a baseline, as the README promises, and the gate's oracle check
  reads gzipped measures;
- values the command line took silently (``--relations ''``, ``--examples``/``--seed`` with ``--corpus``,
  ``--cluster-workers`` without ``--cluster``, audit ``--spread every`` without a cluster, ``report --examples
  1000000000``, ``--timeout 1e308``, ``/dev/zero`` or a FIFO as ``--corpus``) are one line, exit 2, before
  anything is written;
- every input file kind (case JSON, contracts, audit files, campaign.json) refuses deep nesting, ``1e400`` and
  5000-digit integers in one line of its own error kind; unknown spec keys, ``version: true``,
  ``initial_state: "bogus"``, negative ``xs_widths``, wrong-typed environment fields and a resumed campaign.json
  with ``subjects: []`` are refused by name and value.

Most run in this process (``harness.cli.main``); the special files go through a subprocess with a timeout, so a
hang is a failure, not a stuck suite.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.core.corpus_files import write_corpus
from harness.core.errors import AuditFileError, CaseError, ContractError, HarnessError, InvalidArgument

ROOT = Path(__file__).resolve().parents[3]
CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [6]})
TASK = {"key": "k", "case_id": "c", "subject": "chainer.embed_id", "device": "cpu", "context": "default",
        "status": "ok"}


def _main(*argv: str) -> tuple[int, str]:
    """``python -m harness ARGV`` in this process: (exit code, stderr)."""
    from harness.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(list(argv))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
    return rc, err.getvalue()


def _refused(rc_err: tuple[int, str], *needles: str) -> str:
    rc, err = rc_err
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("harness: note:")]
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def corpus(tmp_path) -> Path:
    p = tmp_path / "c.jsonl"
    write_corpus([CASE], str(p))
    return p


# ---- plain or .gz: one finder --------------------------------------------------------------------------
def _report_dir(path: Path, measures: list[dict] | None = None) -> Path:
    """A finished report's directory: its record files gzipped, as report.py leaves them."""
    path.mkdir()
    (path / "tasks.jsonl.gz").write_bytes(gzip.compress((json.dumps(TASK) + "\n").encode()))
    (path / "campaign.json").write_text(json.dumps({"subjects": [TASK["subject"]], "devices": ["cpu"],
                                                    "contexts": ["default"], "repeats": 1, "fresh": 0,
                                                    "timeout": 60.0}))
    (path / "environment.json").write_text(json.dumps({"python": "3.12"}))
    if measures is not None:
        text = "".join(json.dumps(m) + "\n" for m in measures)
        (path / "measures.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    return path


def test_a_report_directory_is_a_baseline(tmp_path):
    from harness.cli import build_parser
    from harness.core import argcheck

    base = _report_dir(tmp_path / "report")
    assert argcheck.baseline_dir("baseline", str(base)) == str(base)
    args = build_parser().parse_args(["gate", "--baseline", str(base)])
    assert args.baseline == str(base)
    (base / "tasks.jsonl.gz").write_bytes(b"not gzip")  # a corrupt one is still one line
    with pytest.raises(InvalidArgument, match="cannot be read"):
        argcheck.baseline_dir("baseline", str(base))


def test_the_gate_reads_the_oracle_measures_of_a_gzipped_baseline(tmp_path):
    from harness.outputs.gate import _oracle_growth

    m = {"kind": "oracle", "case_id": "c", "subject": "chainer.embed_id", "device": "cpu", "context": "default",
         "tensor": "grad.W", "error_ratio": 0.5, "within": True}
    base = _report_dir(tmp_path / "base", [m])
    now = _report_dir(tmp_path / "now", [{**m, "error_ratio": 3.0, "within": False}])
    grown = _oracle_growth(str(now), str(base))
    assert [(g.kind, g.tensor, g.verdict) for g in grown] == [("baseline", "grad.W", "broken")]


def test_every_reader_finds_plain_or_gzipped_records(tmp_path):
    from harness.core.record_files import record_file
    from harness.core.records import read_records

    plain = tmp_path / "tasks.jsonl"
    assert record_file(str(plain)) is None and list(read_records(str(plain))) == []
    _report_dir(tmp_path / "d")
    gz = tmp_path / "d" / "tasks.jsonl"
    assert record_file(str(gz)) == str(gz) + ".gz"
    assert [obj for _, obj in read_records(str(gz))] == [TASK]
    gz.write_text(json.dumps({**TASK, "key": "plain"}) + "\n")  # a resumed run appends to the plain file
    assert record_file(str(gz)) == str(gz)


# ---- values the command line took silently ----------------------------------------------------------
def test_empty_relations_is_refused_like_empty_subjects(tmp_path):
    out = tmp_path / "out"
    _refused(_main("report", "--subjects", "", "--out", str(out)), "subjects=''")
    _refused(_main("report", "--relations", "", "--out", str(out)), "relations=''", "names nothing")
    _refused(_main("report", "--relations", ",", "--out", str(out)), "relations=','")
    assert not out.exists()


@pytest.mark.parametrize("flag,value", [("--examples", "3"), ("--seed", "7")])
def test_examples_or_seed_with_a_corpus_is_refused(tmp_path, corpus, flag, value):
    out = tmp_path / "out"
    line = _refused(_main("report", "--corpus", str(corpus), flag, value, "--out", str(out)), flag, "corpus=")
    assert "ignored" in line
    assert not out.exists()


@pytest.mark.parametrize("verb", ["report", "gate", "audit"])
def test_cluster_options_without_a_cluster_are_refused(tmp_path, verb):
    extra = ["--out", str(tmp_path / ("a.json" if verb == "audit" else "out"))]
    _refused(_main(verb, "--cluster-workers", "3", *extra), "cluster-workers=3", "--cluster")
    _refused(_main(verb, "--spread", "every", *extra), "spread='every'", "--cluster")
    assert not any(tmp_path.iterdir())


def test_huge_example_counts_are_refused_with_the_bound(tmp_path):
    for verb in ("report", "cases"):
        line = _refused(_main(verb, "--examples", "1000000000", "--out", str(tmp_path / "x")), "examples=1000000000",
                        "<= 100,000")
        assert "--corpus" in line or "--shard" in line  # says what to do instead
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("verb", ["report", "replay", "shrink", "localize"])
@pytest.mark.parametrize("value", ["1e308", "inf", "nan", "0", "-1", "1e400", "soon"])
def test_timeouts_are_bounded_before_anything_is_written(tmp_path, corpus, verb, value):
    case = tmp_path / "case.json"
    case.write_text(CASE.to_json())
    argv = {"report": ["report", "--corpus", str(corpus), "--out", str(tmp_path / "out")],
            "replay": ["replay", str(case), "--subject", "chainer.embed_id"],
            "shrink": ["shrink", str(case), "--subject", "chainer.embed_id", "--kind", "error"],
            "localize": ["localize", str(case), "--subject", "chainer.embed_id"]}[verb]
    _refused(_main(*argv, f"--timeout={value}"), "timeout=")
    assert not (tmp_path / "out").exists()


def _harness(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=env)


def _special_files(tmp_path) -> list[tuple[str, str]]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return [("/dev/zero", "a device"), (str(fifo), "a FIFO")]


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_special_files_as_corpus_are_refused_before_reading(tmp_path):
    if not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"):
        pytest.skip("no /dev/zero or FIFOs on this system")
    out = tmp_path / "out"
    for path, what in _special_files(tmp_path):
        for argv in (["report", "--corpus", path, "--out", str(out)], ["gate", "--corpus", path, "--out", str(out)],
                     ["audit", "--corpus", path, "--out", str(tmp_path / "a.json")],
                     ["replay", path, "--subject", "chainer.embed_id"], ["contracts", "check", "--contracts", path]):
            try:
                p = _harness(*argv)  # a hang here (a FIFO read waits for a writer) is the failure
            except subprocess.TimeoutExpired:
                pytest.fail(f"{argv} hung on {what}")
            assert p.returncode == 2, (argv, p.returncode, p.stderr[-500:])
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-500:]
            assert what in lines[0] and path in lines[0], lines[0]
    assert not out.exists()


def test_loaders_refuse_special_files_too(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    from harness.judge.contracts import load_contracts
    from harness.outputs.audit import load_audit

    [(_, _), (fifo, _)] = _special_files(tmp_path)
    with pytest.raises(ContractError, match="a FIFO"):
        load_contracts(fifo)
    with pytest.raises(AuditFileError, match="a FIFO"):
        load_audit(fifo)


# ---- every file kind: nesting and number sizes -----------------------------------------------------------
DEEP = "[" * 800 + "]" * 800
HUGE_INT = "9" * 5000
BIG_FLOAT = "1e400"


def _case_text(**spec_values: str) -> str:
    spec = ", ".join(f'"{k}": {v}' for k, v in {"vocab": "3", "width": "4", "ids_shape": "[6]", **spec_values}.items())
    return '{"version": 1, "family": "embed", "seed": 1, "spec": {' + spec + "}}"


@pytest.mark.parametrize("value,message", [(DEEP, "nested too deeply"), (HUGE_INT, "5000 characters"),
                                           (BIG_FLOAT, "1e400 is out of range")])
def test_case_json_limits(tmp_path, value, message):
    with pytest.raises(CaseError, match=message) as info:
        Case.from_json(_case_text(w_scale=value))
    assert "\n" not in str(info.value)
    p = tmp_path / "c.jsonl"
    p.write_text(CASE.to_json() + "\n" + _case_text(w_scale=value) + "\n")
    from harness.core.corpus_files import load_corpus

    with pytest.raises(CaseError, match=rf"c\.jsonl:2: .*{message}"):
        load_corpus(str(p))


@pytest.mark.parametrize("value,message", [(DEEP, "nested too deeply"), (HUGE_INT, "5000 characters"),
                                           (BIG_FLOAT, "1e400 is out of range")])
def test_contracts_limits(tmp_path, value, message):
    from harness.judge.contracts import load_contracts

    text = (ROOT / "contracts.toml").read_text() + f"\n[[bad_input]]\ntag = \"bad:x\"\nextra = {value}\n"
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ContractError, match=message) as info:
        load_contracts(p)
    assert "\n" not in str(info.value)


def _audit() -> dict:
    t = {"digest": "ab" * 16, "dtype": "float32", "shape": [4], "repeats_agreed": True}
    e = {"case_id": "c0", "family": "embed", "subject": "s", "device": "cpu", "context": "default",
         "status": "ok", "tensors": {"y": t}}
    return {"format": "harness-audit", "version": 1, "created": "2026-01-01T00:00:00+00:00",
            "environment": {"gpu": {"available": False, "devices": []}, "blas": [{"num_threads": 2}],
                            "cpu": {"model": "x", "cores": 2}},
            "corpus": {"digest": "d", "cases": 1}, "settings": {}, "entries": [e]}


@pytest.mark.parametrize("value,message", [(DEEP, "nested too deeply"), (HUGE_INT, "5000 characters"),
                                           (BIG_FLOAT, "1e400 is out of range")])
def test_audit_file_limits(tmp_path, value, message):
    from harness.outputs.audit import load_audit

    p = tmp_path / "a.json"
    p.write_text(json.dumps(_audit()).replace('"settings": {}', f'"settings": {{"x": {value}}}'))
    with pytest.raises(AuditFileError, match=message) as info:
        load_audit(p)
    assert "\n" not in str(info.value)


def _run_dir(tmp_path, **meta) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    write_corpus([CASE], str(d / "corpus.jsonl"))
    m = {"subjects": ["chainer.embed_id"], "devices": ["cpu"], "contexts": ["default"], "relations": [],
         "repeats": 2, "fresh": 0, "timeout": 60.0, "plugins": [], **meta}
    (d / "campaign.json").write_text(json.dumps(m))
    return d


@pytest.mark.parametrize("value,message", [(DEEP, "nested too deeply"), (HUGE_INT, "5000 characters"),
                                           (BIG_FLOAT, "1e400 is out of range")])
def test_campaign_json_limits(tmp_path, value, message):
    from harness.outputs.report import read_campaign_meta

    d = _run_dir(tmp_path)
    (d / "campaign.json").write_text((d / "campaign.json").read_text().replace('"plugins": []',
                                                                               f'"plugins": {value}'))
    with pytest.raises(InvalidArgument, match=message) as info:
        read_campaign_meta(str(d))
    assert "\n" not in str(info.value)


# ---- fields refused by name and value ---------------------------------------------------------------------
@pytest.mark.parametrize("text,message", [
    (_case_text(colour='"red"'), r"\$\.spec\.colour is not a known field"),
    ('{"version": true, "family": "embed", "seed": 1, "spec": {"vocab": 3, "width": 4, "ids_shape": [6]}}',
     r"\$\.version=true is not supported"),
    ('{"family": "lstm", "seed": 1, "spec": {"n_layers": 1, "hidden": 2, "in_size": 2, "lengths": [2], '
     '"initial_state": "bogus"}}', r"\$\.spec\.initial_state='bogus' must be 'none' or 'given'"),
    ('{"family": "lstm", "seed": 1, "spec": {"n_layers": 1, "hidden": 2, "in_size": 2, "lengths": [2, 2], '
     '"xs_widths": [2, -1000000]}}', r"\$\.spec\.xs_widths\[1\]=-1000000 must be >= 0"),
    ('{"family": "embed", "seed": 1, "spec": {"vocab": 3, "width": 4, "ids_shape": [6], "in_size": 3}}',
     r"\$\.spec\.in_size is not a known field"),  # an lstm key in an embed spec
])
def test_case_fields_refused_by_path_and_value(text, message):
    with pytest.raises(CaseError, match=message) as info:
        Case.from_json(text)
    assert "\n" not in str(info.value)


def test_a_negative_width_no_longer_defeats_the_size_limit():
    from harness.core.case_limits import check_case_size

    text = ('{"family": "lstm", "seed": 1, "expect": {"kind": "raises", "errors": ["ValueError"]}, "spec": '
            '{"n_layers": 1, "hidden": 2, "in_size": 2, "lengths": [300000, 2], "xs_widths": [-1000, 1000]}}')
    with pytest.raises(CaseError, match="xs_widths"):
        check_case_size(Case.from_json(text), 1 << 20)


@pytest.mark.parametrize("path,value,message", [
    (("environment", "gpu", "available"), "yes", r"\$\.environment\.gpu\.available='yes' must be true or false"),
    (("environment", "blas"), "openblas", r"\$\.environment\.blas='openblas' must be an array"),
    (("environment", "blas", 0, "num_threads"), "two", r"\$\.environment\.blas\[0\]\.num_threads='two' must be"),
    (("environment", "cpu", "cores"), [2], r"\$\.environment\.cpu\.cores=\[2\] must be"),
    (("environment", "gpu", "devices"), {"name": "x"}, r"\$\.environment\.gpu\.devices=\{.*\} must be an array"),
])
def test_wrong_typed_environment_fields_are_refused(tmp_path, path, value, message):
    from harness.outputs.audit import compare_audits, load_audit

    data = _audit()
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    p = tmp_path / "a.json"
    p.write_text(json.dumps(data))
    with pytest.raises(AuditFileError, match=message) as info:
        compare_audits(load_audit(p), load_audit(p))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("meta,message", [
    ({"subjects": []}, r"\$\.subjects=\[\] must name at least one subject"),
    ({"devices": []}, r"\$\.devices=\[\] must name at least one device"),
    ({"contexts": []}, r"\$\.contexts=\[\] must name at least one context"),
    ({"repeats": 0}, r"\$\.repeats=0 must be >= 1"),
    ({"timeout": 1e300}, r"\$\.timeout=1e\+300 must be <= 604800"),
])
def test_a_resumed_campaign_json_is_validated_whole(tmp_path, meta, message):
    d = _run_dir(tmp_path, **meta)
    _refused(_main("report", "--resume", str(d), "--quiet"), "campaign.json")
    from harness.outputs.report import read_campaign_meta

    with pytest.raises(InvalidArgument, match=message):
        read_campaign_meta(str(d))
    assert not (d / "tasks.jsonl").exists()  # nothing ran


def test_the_help_shows_the_settings_defaults():
    from harness.cli import build_parser
    from harness.execute.campaign import CampaignOptions

    sub = next(a for a in build_parser()._actions if a.dest == "verb").choices["report"]
    text = sub.format_help()
    for key in ("repeats", "fresh"):
        assert f"(default {getattr(CampaignOptions, key)})" in " ".join(text.split()), key
    assert CampaignOptions.timeout is None  # no fixed timeout: each run's follows its case's work
    assert "(default scaled with the case's estimated work)" in " ".join(text.split())


def test_a_given_flag_equal_to_its_default_still_counts_on_resume(tmp_path):
    d = _run_dir(tmp_path, repeats=2)
    from harness.execute.campaign import CampaignOptions

    _refused(_main("report", "--resume", str(d), "--repeats", str(CampaignOptions.repeats), "--quiet"),
             "contradict its campaign.json", "--repeats")


def test_errors_are_harness_errors_not_others():
    # The schema module's own error becomes each caller's kind: no ValueError escapes a loader.
    for bad in ('{"family": "embed"', "[" * 5000, "1" * 5000):
        with pytest.raises(HarnessError):
            Case.from_json(bad)
