"""The bisection engine's search, cache and log, with each probe replaced by a table of what a pin set saves
(no environment, no process): pins, fingerprints, the one-package step, skipped releases, errors at the ends,
the log's reuse and repair, the cache's ownership and the conditions in its key."""

from __future__ import annotations

import json
import os
import types

import pytest
from packaging.version import Version

from harness.core.errors import InvalidArgument
from harness.upstream import bisect as B
from harness.upstream import bisect_conditions as C
from harness.upstream import bisect_envs as E


def test_pins_parse_and_bad_pins_are_refused_naming_the_argument():
    assert B.parse_pins(["numpy==2.2.6 Chainer==7.8.1", "espnet==202511"], "good") == \
        {"numpy": "2.2.6", "chainer": "7.8.1", "espnet": "202511"}
    for bad in ("numpy=2.2", "numpy==", "==1.0", "numpy==not-a-version"):
        with pytest.raises(InvalidArgument, match="good="):
            B.parse_pins([bad], "good")


def test_pins_from_a_fingerprint_a_run_directory_or_an_audit_file(tmp_path):
    fp = {"packages": {"numpy": "2.2.6", "chainer": "7.8.1", "cupy": None, "pandas": "2.2", "pytest": "8"}}
    (tmp_path / "environment.json").write_text(json.dumps(fp))
    (tmp_path / "audit.json").write_text(json.dumps({"environment": fp, "entries": []}))
    want = {"numpy": "2.2.6", "chainer": "7.8.1"}  # the harness's own packages and absent ones left out
    assert B.pins_from_environment(str(tmp_path)) == want
    assert B.pins_from_environment(str(tmp_path / "audit.json")) == want
    for name, data in (("x.json", b"[]"), ("y.json", b"\xff\xfe{")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InvalidArgument, match="environment="):
            B.pins_from_environment(str(tmp_path / name))


COND = C.Conditions("AMD EPYC", "f1a9", (("OPENBLAS_CORETYPE", "SkylakeX"), ("OPENBLAS_NUM_THREADS", "2")),
                    "OpenBLAS SkylakeX kernels, 2 threads")


def _fake(monkeypatch, outcome_of, releases=(), broken=(), cond=COND):
    """Probes that save ``outcome_of(pins)``; ``broken`` (name, version) pairs cannot be installed."""
    probed: list[dict] = []

    def probe(self, pins, env_dir):
        probed.append(dict(pins))
        assert os.path.isdir(self.run_dir) and env_dir.startswith(self.run_dir)
        if set(pins.items()) & set(broken):
            raise E.InstallFailed("ERROR: No matching distribution found")
        return outcome_of(pins)

    monkeypatch.setattr(B._Prober, "_probe", probe)
    monkeypatch.setattr(C, "measure", lambda context, user: cond)
    monkeypatch.setattr(E, "released_versions", lambda name, inst: [Version(v) for v in releases])
    return probed


def _write(case, subject, out, case_id="", plugins=()):
    with open(out, "w") as fh:
        fh.write(f"# the script for {subject}\n")
    return types.SimpleNamespace(script=out, data=None)


def _q(tmp_path, good, bad, **kw):
    case = tmp_path / "case.json"
    case.write_text("{}")
    return B.Bisection(case=str(case), subject="chainer.NStepLSTM", good=good, bad=bad,
                       cache=str(tmp_path / "cache"), installer="pip", **kw)


def _hy(new: bool):
    return [("ys.0", "d0"), ("hy", "d1" if new else "d2")]


def test_the_package_then_the_first_release_that_changes_the_bits(tmp_path, monkeypatch, capsys):
    releases = ["2.2.5", "2.2.6", "2.3.0", "2.3.1", "2.3.2", "2.4.0", "2.4.1", "2.4.2", "2.5.0"]
    probed = _fake(monkeypatch, lambda pins: _hy(Version(pins["numpy"]) >= Version("2.4.1")), releases,
                   broken={("numpy", "2.3.2")})
    said: list[str] = []
    q = _q(tmp_path, {"chainer": "7.8.1", "numpy": "2.2.6"}, {"chainer": "7.8.2", "numpy": "2.4.2"})
    assert B.bisect(q, said.append, _write) == 1
    answer = capsys.readouterr().out.strip()
    assert answer == ("numpy 2.4.1 changes chainer.NStepLSTM hy (first at 2.4.1; 2.4.0 agrees) on OpenBLAS "
                      "SkylakeX kernels, 2 threads, AMD EPYC")
    assert any("chainer alone at the bad end's version" in s and "agrees with the good end" in s for s in said)
    assert any("numpy alone at the bad end's version" in s and "differs from the good end (first: hy)" in s
               for s in said)
    # the releases outside the pins are never probed; the probes hold every other package at the good end
    assert not any(p.get("numpy") in ("2.2.5", "2.5.0") for p in probed)
    assert all(p["chainer"] == "7.8.1" for p in probed if p["numpy"] not in ("2.2.6", "2.4.2"))
    # a rerun probes nothing again, but for the release that could not be installed (its cause may be fixed)
    again: list[str] = []
    n = len(probed)
    assert B.bisect(q, again.append, _write) == 1 and capsys.readouterr().out.strip() == answer
    assert probed[n:] == [{"chainer": "7.8.1", "numpy": "2.3.2"}], probed
    assert [s for s in again if s.startswith("probe ") and not s.endswith("(from the log)")] == \
        [s for s in again if "numpy==2.3.2" in s]
    # nothing of the runs is left in envs/
    assert os.listdir(tmp_path / "cache" / "envs") == []


def test_a_release_that_cannot_be_installed_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    _fake(monkeypatch, lambda pins: _hy(Version(pins["numpy"]) >= Version("2.3.1")),
          ["2.2.6", "2.3.0", "2.3.1", "2.3.2", "2.4.0"], broken={("numpy", "2.3.1")})
    said: list[str] = []
    assert B.bisect(_q(tmp_path, {"numpy": "2.2.6"}, {"numpy": "2.4.0"}), said.append, _write) == 1
    assert any("numpy==2.3.1: cannot be probed, skipped: ERROR: No matching distribution" in s for s in said)
    assert capsys.readouterr().out.strip().endswith(
        "; not installable or not runnable, so not probed between them: 2.3.1")


def test_ends_agree_exit_0_an_end_that_cannot_be_probed_and_errors_at_both_ends_exit_2(tmp_path, monkeypatch,
                                                                                       capsys):
    _fake(monkeypatch, lambda pins: "ValueError in backward: x" if pins["numpy"].startswith("3") else _hy(False),
          broken={("numpy", "9.9")})
    assert B.bisect(_q(tmp_path, {"numpy": "2.2.6"}, {"numpy": "2.4.0"}), lambda s: None, _write) == 0
    assert capsys.readouterr().out.strip() == ("the two ends agree on chainer.NStepLSTM for this case on OpenBLAS "
                                               "SkylakeX kernels, 2 threads, AMD EPYC: nothing to bisect")
    assert B.bisect(_q(tmp_path, {"numpy": "2.2.6"}, {"numpy": "9.9"}), lambda s: None, _write) == 2
    assert capsys.readouterr().err.strip() == ("harness: error: bisect: the bad end (numpy==9.9) cannot be probed: "
                                               "ERROR: No matching distribution found")
    # the same error at both ends is an error, never "agree"
    assert B.bisect(_q(tmp_path, {"numpy": "3.0"}, {"numpy": "3.1"}), lambda s: None, _write) == 2
    out = capsys.readouterr()
    assert "agree" not in out.out and "both ends fail: good (numpy==3.0): ValueError in backward: x; bad " \
        "(numpy==3.1): ValueError in backward: x" in out.err
    with pytest.raises(InvalidArgument, match="pinned at one end only"):
        B.bisect(_q(tmp_path, {"numpy": "2.2.6"}, {"chainer": "7.8.1"}), lambda s: None, _write)


def test_another_coretype_is_another_question(tmp_path, monkeypatch):
    """The conditions are part of the log's name: a bisection under other kernels reuses nothing."""
    probed = _fake(monkeypatch, lambda pins: _hy(False))
    q = _q(tmp_path, {"numpy": "2.2.6"}, {"numpy": "2.4.0"})
    assert B.bisect(q, lambda s: None, _write) == 0 and len(probed) == 2
    other = C.Conditions(COND.cpu, COND.cpu_flags, (("OPENBLAS_CORETYPE", "Haswell"), ("OPENBLAS_NUM_THREADS", "2")),
                         "OpenBLAS Haswell kernels, 2 threads")
    monkeypatch.setattr(C, "measure", lambda context, user: other)
    said: list[str] = []
    assert B.bisect(q, said.append, _write) == 0 and len(probed) == 4
    assert not any("(from the log)" in s for s in said)
    assert len(list((tmp_path / "cache" / "logs").glob("*.jsonl"))) == 2


def test_damaged_log_lines_are_dropped_and_said(tmp_path, monkeypatch):
    probed = _fake(monkeypatch, lambda pins: _hy(False))
    q = _q(tmp_path, {"numpy": "2.2.6"}, {"numpy": "2.4.0"})
    assert B.bisect(q, lambda s: None, _write) == 0
    [log] = (tmp_path / "cache" / "logs").glob("*.jsonl")
    good = log.read_bytes()
    log.write_bytes(good + b'{"pins": {"numpy": "2.3.0"}, "outc\n\xff\xfe not utf-8\n{"pins": 3}\n[]\n'
                    b'{"pins": {"numpy": "2.3.0"}, "outcome": [["y"]]}\n')
    said: list[str] = []
    assert B.bisect(q, said.append, _write) == 0 and len(probed) == 2  # both ends from the log
    assert any(s.endswith(": 5 damaged line(s) dropped") for s in said), said
    assert log.read_bytes() == good


def test_a_cache_that_is_a_file_or_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    probed = _fake(monkeypatch, lambda pins: _hy(False))
    (tmp_path / "file").write_text("x")
    for cache in (tmp_path / "file", tmp_path / "file" / "below"):
        q = B.Bisection(**{**_q(tmp_path, {"numpy": "1"}, {"numpy": "2"}).__dict__, "cache": str(cache)})
        with pytest.raises(InvalidArgument, match="cache="):
            B.bisect(q, lambda s: None, _write)

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(B.tempfile, "mkstemp", refuse)  # a read-only folder (root writes anywhere)
    with pytest.raises(InvalidArgument, match="cannot write there .Permission denied"):
        B.bisect(_q(tmp_path, {"numpy": "1"}, {"numpy": "2"}), lambda s: None, _write)
    assert probed == []


def test_a_killed_runs_folder_is_removed_and_nothing_of_the_users(tmp_path, monkeypatch):
    _fake(monkeypatch, lambda pins: _hy(False))
    envs = tmp_path / "cache" / "envs"
    dead = envs / f"{B.RUN_PREFIX}999999999-abc"  # no process has this id
    alive = envs / f"{B.RUN_PREFIX}{os.getppid()}-abc"
    for d in (dead, alive):
        (d / "env-1" / "bin").mkdir(parents=True)
        (d / B.MARKER).write_text("x")
    unmarked = envs / f"{B.RUN_PREFIX}999999999-mine"
    unmarked.mkdir()
    (envs / "case.json").write_text("the user's")
    said: list[str] = []
    assert B.bisect(_q(tmp_path, {"numpy": "1"}, {"numpy": "2"}), said.append, _write) == 0
    assert sorted(os.listdir(envs)) == sorted([alive.name, unmarked.name, "case.json"])
    assert f"removed {dead.name}, left by a bisect that did not finish" in said


def test_the_probe_script_is_written_once_before_any_probe(tmp_path, monkeypatch):
    _fake(monkeypatch, lambda pins: _hy(False))
    calls = []

    def write(case, subject, out, case_id="", plugins=()):
        calls.append((subject, os.path.basename(out), case_id, plugins))
        return _write(case, subject, out)

    q = _q(tmp_path, {"numpy": "1"}, {"numpy": "2"}, case_id="abc", plugins=("m:S",))
    assert B.bisect(q, lambda s: None, write) == 0
    assert calls == [("chainer.NStepLSTM", "repro.py", "abc", ("m:S",))]
