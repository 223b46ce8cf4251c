"""``harness bisect``'s pure parts and its search, with the environments replaced by a table of what each pin
set would digest (no process, no install): pins, fingerprints, the one-package step, skipped releases, the log."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from harness.core.errors import InvalidArgument
from harness.verbs import bisect as B
from harness.verbs import bisect_envs as E


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
    (tmp_path / "x.json").write_text("[]")
    with pytest.raises(InvalidArgument, match="environment="):
        B.pins_from_environment(str(tmp_path / "x.json"))


def _fake(monkeypatch, digest_of, releases, broken=()):
    """Environments that digest as ``digest_of(pins)`` says; ``broken`` versions fail to install."""
    made = []

    def make_env(path, inst):
        made.append(path)
        return path

    def install(python, pins, inst):
        if set(pins.items()) & set(broken):
            raise E.InstallFailed("ERROR: no wheel for this Python")
        install.pins[python] = dict(pins)

    install.pins = {}

    def run_probe(python, request, timeout, env=None):
        pins = install.pins[python]
        return {"status": "ok", "versions": pins, "digests": [["ys.0", "same"], ["hy", digest_of(pins)]]}

    monkeypatch.setattr(E, "make_env", make_env)
    monkeypatch.setattr(E, "install", install)
    monkeypatch.setattr(E, "run_probe", run_probe)
    monkeypatch.setattr(E, "released_versions", lambda name, inst: [Version(v) for v in releases[name]])
    return made


def _opts(tmp_path, good, bad, **kw):
    case = tmp_path / "case.json"
    case.write_text("{}")
    return B.BisectOptions(case=str(case), subject="chainer.NStepLSTM", good=good, bad=bad,
                           cache=str(tmp_path / "cache"), **kw)


def test_the_package_then_the_first_release_that_changes_the_bits(tmp_path, monkeypatch, capsys):
    releases = {"numpy": ["2.2.5", "2.2.6", "2.3.0", "2.3.1", "2.3.2", "2.4.0", "2.4.1", "2.4.2", "2.5.0"]}
    digest = lambda pins: "new" if Version(pins["numpy"]) >= Version("2.4.1") else "old"  # noqa: E731
    said: list[str] = []
    _fake(monkeypatch, digest, releases, broken={("numpy", "2.3.2")})
    opts = _opts(tmp_path, {"chainer": "7.8.1", "numpy": "2.2.6"}, {"chainer": "7.8.2", "numpy": "2.4.2"})
    assert B.bisect(opts, said.append) == 1
    answer = capsys.readouterr().out.strip()
    assert answer == "numpy 2.4.1 changes chainer.NStepLSTM hy (first at 2.4.1; 2.4.0 agrees)"
    assert any("chainer alone at the bad end's version" in s and "agrees with the good end" in s for s in said)
    assert any("numpy alone at the bad end's version" in s and "differs from the good end (first: hy)" in s
               for s in said)
    # the releases outside the pins are never probed; the probes hold every other package at the good end
    assert not any("2.2.5" in s or "2.5.0" in s for s in said)
    assert all("chainer==7.8.1" in s for s in said if s.startswith("probe ") and ": numpy 2." in s)
    # a rerun probes nothing again: every probe comes from the log
    again: list[str] = []
    assert B.bisect(opts, again.append) == 1 and capsys.readouterr().out.strip() == answer
    probes = [s for s in again if s.startswith("probe ")]
    assert probes and all(s.endswith("(from the log)") for s in probes)


def test_a_release_that_cannot_be_installed_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    releases = {"numpy": ["2.2.6", "2.3.0", "2.3.1", "2.3.2", "2.4.0"]}
    digest = lambda pins: "new" if Version(pins["numpy"]) >= Version("2.3.1") else "old"  # noqa: E731
    said: list[str] = []
    _fake(monkeypatch, digest, releases, broken={("numpy", "2.3.1")})
    assert B.bisect(_opts(tmp_path, {"numpy": "2.2.6"}, {"numpy": "2.4.0"}), said.append) == 1
    assert any("numpy==2.3.1: cannot be installed, skipped: ERROR: no wheel" in s for s in said)
    # the first probed release that changes the bits is named, the skipped one between said in the answer
    assert capsys.readouterr().out.strip() == ("numpy 2.3.2 changes chainer.NStepLSTM hy (first at 2.3.2; 2.3.0 "
                                               "agrees); not installable, so not probed between them: 2.3.1")


def test_ends_that_agree_exit_0_and_an_end_that_cannot_be_installed_is_an_error(tmp_path, monkeypatch, capsys):
    made = _fake(monkeypatch, lambda pins: "old", {"numpy": []}, broken={("numpy", "9.9")})
    assert B.bisect(_opts(tmp_path, {"numpy": "2.2.6"}, {"numpy": "2.4.0"}), lambda s: None) == 0
    assert "the two ends agree" in capsys.readouterr().out and made
    with pytest.raises(B.HarnessError, match="the bad end cannot be installed or run"):
        B.bisect(_opts(tmp_path, {"numpy": "2.2.6"}, {"numpy": "9.9"}), lambda s: None)
    with pytest.raises(InvalidArgument, match="pinned at one end only"):
        B.bisect(_opts(tmp_path, {"numpy": "2.2.6"}, {"chainer": "7.8.1"}), lambda s: None)
