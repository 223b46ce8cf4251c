"""``harness bisect`` offline: wheels of a small package built here (``bisectee``, whose function changes its
bits at a known release), a subject plug-in that calls it, and a bisection between two pins that must name
that release; one release that cannot be installed is skipped and said; a rerun reads its log."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.core.cases import Case

ROOT = Path(__file__).resolve().parents[2]

#: The releases built, the one whose bits change first, and the one no Python here can install.
RELEASES = ("1.0", "1.1", "1.2", "1.3", "1.4", "2.0")
CHANGES_AT = "1.4"
BROKEN = "1.2"

PLUGIN = '''
import numpy as np
from harness.core.cases import build_arrays
from harness.subjects.base import Subject


def _run(case, device, context, rec):
    import bisectee

    W = np.asarray(build_arrays(case)["W"], dtype=np.float32)
    with rec.phase("forward"):
        y = bisectee.scale(W)
    rec.outputs({"y": y, "W.copy": W.copy()})


SUBJECTS = (Subject("bisectee.scale", "embed", _run, devices=("cpu",), description="calls bisectee.scale"),)
'''


def _wheel(directory: Path, name: str, version: str, files: dict[str, str], requires_python: str = "") -> None:
    """A pure-Python wheel, written as the format says (no build backend: nothing downloaded)."""
    info = f"{name}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
             + (f"Requires-Python: {requires_python}\n" if requires_python else ""),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={h},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as z:
        for path, text in {**files, f"{info}/RECORD": "\n".join(record) + "\n"}.items():
            z.writestr(path, text)


def _bisectee(version: str) -> str:
    # from CHANGES_AT on, the product is rounded once more (another bit pattern for most elements)
    factor = "np.float32(1.0) + np.float32(2.0 ** -20)" if tuple(map(int, version.split("."))) >= (1, 4) \
        else "np.float32(1.0)"
    return f"import numpy as np\n\n\ndef scale(w):\n    return w * ({factor})\n"


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bisect")
    wheels = tmp / "wheels"
    wheels.mkdir()
    for v in RELEASES:
        _wheel(wheels, "bisectee", v, {"bisectee/__init__.py": _bisectee(v)},
               requires_python=">=99" if v == BROKEN else "")
    for v in ("1.0", "1.1"):  # a second package that differs between the ends and changes nothing
        _wheel(wheels, "bystander", v, {"bystander/__init__.py": f"VERSION = {v!r}\n"})
    (tmp / "bisectee_subject.py").write_text(PLUGIN)
    case = tmp / "case.json"
    case.write_text(Case("embed", 5, {"vocab": 7, "width": 5, "ids_shape": [4]}).to_json())
    return tmp, wheels, case


def _bisect(tmp: Path, wheels: Path, case: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "harness", "bisect", str(case), "--subject", "bisectee.scale",
            "--subject-plugin", "bisectee_subject:SUBJECTS", "--find-links", str(wheels), "--no-index",
            "--cache", str(tmp / "cache"), "--installer", "pip", *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)])}
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=900, env=env)


@pytest.mark.slow  # throwaway environments and a probe process each: CI runs it, `make test` leaves it out
def test_bisect_names_the_package_and_the_release_that_changes_the_bits(offline):
    tmp, wheels, case = offline
    r = _bisect(tmp, wheels, case, "--good", "bystander==1.0 bisectee==1.0", "--bad", "bystander==1.1",
                "--bad", "bisectee==2.0")
    assert r.returncode == 1, r.stdout + r.stderr
    answer = r.stdout.strip().splitlines()[-1]
    assert answer == (f"bisectee {CHANGES_AT} changes bisectee.scale y (first at {CHANGES_AT}; 1.3 agrees)"), \
        r.stdout + r.stderr
    # one package at a time: the bystander alone at its bad version agrees, bisectee alone changes the bits
    assert "bystander alone at the bad end's version: bisectee==1.0 bystander==1.1: agrees with the good end" \
        in r.stderr, r.stderr
    assert "bisectee alone at the bad end's version: bisectee==2.0 bystander==1.0: differs from the good end " \
        "(first: y)" in r.stderr, r.stderr
    # the release that cannot be installed is said, and the bisection went on
    [skip] = [ln for ln in r.stderr.splitlines() if f"bisectee=={BROKEN}" in ln]
    assert "cannot be installed, skipped" in skip and "Python" in skip, r.stderr
    # the throwaway environments are gone; the log stays, and a rerun probes nothing again
    assert not (tmp / "cache" / "envs").exists()
    [log] = list((tmp / "cache" / "logs").glob("*.jsonl"))
    probes = len(log.read_text().splitlines())
    again = _bisect(tmp, wheels, case, "--good", "bystander==1.0 bisectee==1.0", "--bad",
                    "bystander==1.1 bisectee==2.0")
    assert again.returncode == 1 and again.stdout.strip().splitlines()[-1] == answer, again.stderr
    assert again.stderr.count("(from the log)") == probes and len(log.read_text().splitlines()) == probes


@pytest.mark.slow
def test_bisect_between_ends_that_agree_says_so(offline):
    tmp, wheels, case = offline
    r = _bisect(tmp, wheels, case, "--good", "bisectee==1.0", "--bad", "bisectee==1.1")
    assert r.returncode == 0 and "the two ends agree" in r.stdout, r.stdout + r.stderr


def test_bisect_refuses_bad_pins_before_any_work(tmp_path):
    for extra, says in ((["--good", "numpy=2.2", "--bad", "numpy==2.3.0"], "good='numpy=2.2'"),
                        (["--good", "numpy==2.2.6", "--bad", "chainer==7.8.1"], "pinned at one end only"),
                        (["--good", "numpy==2.2.6", "--bad", "numpy==2.2.6"], "the same versions")):
        r = subprocess.run([sys.executable, "-m", "harness", "bisect", str(ROOT / "contracts.toml"), "--subject",
                            "chainer.NStepLSTM", "--cache", str(tmp_path / "c"), *extra], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 2 and r.stderr.startswith("harness: error: ") and says in r.stderr, r.stderr
        assert not (tmp_path / "c").exists()


def test_bisect_reads_its_ends_from_two_fingerprints(tmp_path):
    """Two run directories' environment.json: the packages both list are the pins (here all the same, so
    refused before any work, naming them); an explicit pin overrides its fingerprint's."""
    for end, numpy in (("good", "2.2.6"), ("bad", "2.2.6")):
        (tmp_path / end).mkdir()
        (tmp_path / end / "environment.json").write_text(
            '{"packages": {"numpy": "%s", "chainer": "7.8.1", "pandas": "2.2.%d"}}' % (numpy, len(end)))
    base = [sys.executable, "-m", "harness", "bisect", str(ROOT / "contracts.toml"), "--subject", "chainer.NStepLSTM",
            "--cache", str(tmp_path / "c"), "--good-env", str(tmp_path / "good"), "--bad-env", str(tmp_path / "bad")]
    r = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "the two ends pin the same versions (chainer==7.8.1 numpy==2.2.6)" in r.stderr, \
        r.stderr
    r = subprocess.run(base + ["--bad", "numpy==2.2.6", "--bad", "chainer==7.8.0", "--context", "cublas_ws"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "context='cublas_ws'" in r.stderr, r.stderr  # the pins differ now; the context not
    assert not (tmp_path / "c").exists()
