"""``harness bisect`` offline, end to end: wheels of a small package built here (``bisectee``, whose function
changes its bits at a known release, raises in others, cannot be imported in one), a probe script that obeys
the exported reproducer's protocol (``--save-outputs``) and imports it, and bisections between two pins through
the command line. The probe's script is written by the test (the writer is the one seam replaced), so the
bisection is over the planted package alone: nothing of the harness runs in a probe."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from harness.core.cases import Case

ROOT = Path(__file__).resolve().parents[2]

#: The releases built: what each one's ``scale`` does. 1.2 needs a Python no one has (cannot be installed), 3.x
#: raise in the call, 4.0 cannot be imported (the script exits 2, "cannot run here").
SAME, CHANGED, RAISES, BROKEN_IMPORT = "w * np.float32(1.0)", "w * (np.float32(1.0) + np.float32(2.0 ** -20))", \
    "RAISE", "IMPORT"
RELEASES = {"1.0": SAME, "1.1": SAME, "1.2": SAME, "1.3": SAME, "2.0": CHANGED, "2.1": CHANGED,
            "3.0": RAISES, "3.1": RAISES, "4.0": BROKEN_IMPORT}
UNINSTALLABLE = "1.2"

#: A probe script obeying the protocol of ``harness.upstream.reproducer`` (``--save-outputs OUT.npz``: every
#: output by name, or ``__error__``; exit 2 with ``cannot run here: ...`` when it cannot run).
PROBE_SCRIPT = '''"""bisectee.scale on a fixed array."""
import sys


def main(argv):
    if argv == ["--help"]:
        print("usage: repro.py [--save-outputs OUT.npz]")
        return 0
    if argv and (argv[0] != "--save-outputs" or len(argv) != 2):
        print(f"repro.py: error: unknown arguments {argv}", file=sys.stderr)
        return 2
    try:
        import numpy as np
        import bisectee
    except ImportError as exc:
        print(f"cannot run here: {exc}", file=sys.stderr)
        return 2
    print(f"versions: python {sys.version.split()[0]}, numpy {np.__version__}, bisectee {bisectee.VERSION}")
    w = (np.arange(20, dtype=np.float32).reshape(4, 5) + 1) / np.float32(7)
    try:
        arrays = {"y": bisectee.scale(w), "w": w}
    except Exception as exc:
        arrays = {"__error__": np.array(f"{type(exc).__name__} in forward: {exc}")}
    if argv:
        np.savez(argv[1], **arrays)
    return 0


sys.exit(main(sys.argv[1:]))
'''

#: Runs the command line with the probe script above in place of the exported reproducer's writer.
DRIVER = '''import shutil, sys, types
import harness.upstream.bisect as engine
from harness.cli import main


def write(case, subject, out, case_id="", plugins=()):
    shutil.copyfile(sys.argv[1], out)
    return types.SimpleNamespace(script=out, data=None)


engine._default_writer = lambda: write
sys.exit(main(sys.argv[2:]))
'''


def _module(version: str) -> str:
    body = RELEASES[version]
    if body == BROKEN_IMPORT:
        return "raise ImportError('bisectee 4.0 needs libbisect.so, which is not here')\n"
    call = "raise ValueError('scale is gone')" if body == RAISES else f"return {body}"
    return f"import numpy as np\n\nVERSION = {version!r}\n\n\ndef scale(w):\n    {call}\n"


def wheel(directory: Path, name: str, version: str, files: dict[str, str], requires_python: str = "") -> None:
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


def sdist(directory: Path, name: str, version: str, setup_py: str) -> None:
    """An sdist whose ``setup.py`` is ``setup_py`` (built without isolation, as Chainer's is)."""
    base = f"{name}-{version}"
    with tarfile.open(directory / f"{base}.tar.gz", "w:gz") as tar:
        for path, text in {"setup.py": setup_py, "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\n"
                           f"Version: {version}\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bisect")
    wheels = tmp / "wheels"
    wheels.mkdir()
    for v in RELEASES:
        wheel(wheels, "bisectee", v, {"bisectee/__init__.py": _module(v)},
              requires_python=">=99" if v == UNINSTALLABLE else "")
    for v in ("1.0", "1.1"):  # a second package that differs between the ends and changes nothing
        wheel(wheels, "bystander", v, {"bystander/__init__.py": f"VERSION = {v!r}\n"})
    (tmp / "repro.py").write_text(PROBE_SCRIPT)
    (tmp / "driver.py").write_text(DRIVER)
    case = tmp / "case.json"
    case.write_text(Case("embed", 5, {"vocab": 7, "width": 5, "ids_shape": [4]}).to_json())
    return tmp, wheels, case


def _argv(tmp: Path, wheels: Path, case: Path, cache: str, *extra: str) -> list[str]:
    return [sys.executable, str(tmp / "driver.py"), str(tmp / "repro.py"), "bisect", str(case), "--subject",
            "chainer.EmbedID", "--find-links", str(wheels), "--no-index", "--cache", str(tmp / cache),
            "--installer", "pip", *extra]


def _bisect(offline, cache: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(*offline, cache, *extra), capture_output=True, text=True, cwd=ROOT, timeout=900)


@pytest.mark.slow  # a throwaway environment per probe (a venv and a pip install each): CI runs it
def test_bisect_names_the_package_and_the_release_that_changes_the_bits(offline):
    tmp = offline[0]
    r = _bisect(offline, "c1", "--good", "bystander==1.0 bisectee==1.0", "--bad", "bystander==1.1",
                "--bad", "bisectee==2.1")
    assert r.returncode == 1, r.stdout + r.stderr
    answer = r.stdout.strip().splitlines()[-1]
    assert answer.startswith("bisectee 2.0 changes chainer.EmbedID y (first at 2.0; 1.3 agrees) on "), answer
    assert " threads, " in answer, answer  # the conditions it held: BLAS kernels and threads, the CPU
    # one package at a time: the bystander alone at its bad version agrees, bisectee alone changes the bits
    assert "bystander alone at the bad end's version: bisectee==1.0 bystander==1.1: agrees with the good end" \
        in r.stderr, r.stderr
    assert "bisectee alone at the bad end's version: bisectee==2.1 bystander==1.0: differs from the good end " \
        "(first: y)" in r.stderr, r.stderr
    # the release that cannot be installed is said, with pip's own reason, and the bisection went on
    [skip] = [ln for ln in r.stderr.splitlines() if f"bisectee=={UNINSTALLABLE}" in ln]
    assert "cannot be probed, skipped" in skip and "Python" in skip, r.stderr
    # the run's environments are gone; the log stays, and a rerun probes nothing again
    assert os.listdir(tmp / "c1" / "envs") == []
    [log] = list((tmp / "c1" / "logs").glob("*.jsonl"))
    lines = log.read_text().splitlines()
    again = _bisect(offline, "c1", "--good", "bystander==1.0 bisectee==1.0", "--bad", "bystander==1.1 bisectee==2.1")
    assert again.returncode == 1 and again.stdout.strip().splitlines()[-1] == answer, again.stderr
    # every outcome comes from the log; the release that could not be installed is tried again
    assert again.stderr.count("(from the log)") == len([ln for ln in lines if '"outcome"' in ln]), again.stderr
    [retried] = [ln for ln in again.stderr.splitlines() if f"bisectee=={UNINSTALLABLE}" in ln]
    assert "cannot be probed, skipped" in retried and not retried.endswith("(from the log)"), again.stderr


@pytest.mark.slow
def test_ends_that_agree_say_so_and_another_coretype_is_another_question(offline):
    r = _bisect(offline, "c2", "--good", "bisectee==1.0", "--bad", "bisectee==1.1")
    assert r.returncode == 0 and "the two ends agree on chainer.EmbedID for this case on " in r.stdout, \
        r.stdout + r.stderr
    assert "(from the log)" not in r.stderr
    # another OpenBLAS core type: another question, probed afresh (the first answer is not reused)
    other = _bisect(offline, "c2", "--good", "bisectee==1.0", "--bad", "bisectee==1.1", "--env",
                    "OPENBLAS_CORETYPE=Haswell")
    assert other.returncode == 0 and "(from the log)" not in other.stderr, other.stderr
    assert "Haswell kernels" in other.stdout, other.stdout
    assert len(list((offline[0] / "c2" / "logs").glob("*.jsonl"))) == 2
    same = _bisect(offline, "c2", "--good", "bisectee==1.0", "--bad", "bisectee==1.1")
    assert same.returncode == 0 and same.stderr.count("(from the log)") == 2, same.stderr


@pytest.mark.slow
def test_an_end_that_cannot_run_or_errors_at_both_ends_are_exit_2(offline):
    r = _bisect(offline, "c3", "--good", "bisectee==1.0", "--bad", "bisectee==4.0")
    assert r.returncode == 2, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == ("harness: error: bisect: the bad end (bisectee==4.0) cannot be probed: cannot run here: "
                    "bisectee 4.0 needs libbisect.so, which is not here"), r.stderr
    assert "agree" not in r.stdout and "changes" not in r.stdout
    r = _bisect(offline, "c3", "--good", "bisectee==3.0", "--bad", "bisectee==3.1")
    assert r.returncode == 2 and "both ends fail: good (bisectee==3.0): ValueError in forward: scale is gone" \
        in r.stderr and "agree" not in r.stdout, r.stdout + r.stderr
    r = _bisect(offline, "c3", "--good", "bisectee==1.0", "--bad", "bisectee==9.9")
    assert r.returncode == 2 and "the bad end (bisectee==9.9) cannot be probed: ERROR: No matching distribution" \
        in r.stderr, r.stderr


def _ours(marker: str) -> list[int]:
    """The processes whose command line names ``marker``."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and int(pid) != os.getpid():
            out.append(int(pid))
    return out


def _stopped_during_an_install(offline, tmp_path: Path, sig: int) -> tuple[Path, list[str], subprocess.Popen]:
    """A planted Chainer sdist whose build waits; bisect is sent ``sig`` while pip builds it. The cache, its
    argv, and the stopped process."""
    tmp, _, case = offline
    started = tmp_path / "build-started"
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("98.0", "99.0"):
        sdist(wheels, "chainer", v, f"import pathlib, time\npathlib.Path({str(started)!r}).write_text('x')\n"
              f"time.sleep(600)\n")
    cache = tmp_path / "cache"
    (cache / "envs" / "mine").mkdir(parents=True)
    (cache / "envs" / "mine" / "notes.txt").write_text("the user's")
    argv = _argv(tmp, wheels, case, str(cache), "--good", "chainer==98.0", "--bad", "chainer==99.0")
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(3000):  # until pip runs the build (a wait, bounded; no time is asserted)
            if started.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert started.exists() and proc.poll() is None, "the build never started"
        assert _ours(str(wheels)), "no pip process seen"
    finally:
        proc.send_signal(sig)
        proc.wait(timeout=300)
    for _ in range(300):  # the kernel and the guard end the children at once; wait for them to be reaped
        if not _ours(str(wheels)) and not _ours(str(started)):
            break
        time.sleep(0.1)
    assert _ours(str(wheels)) == [] and _ours(str(started)) == []  # no pip, no build, no guard
    assert list((cache / "logs").glob("*.jsonl")) == []  # no line for the probe that did not finish
    for f in wheels.iterdir():  # a later run finds nothing to build: its good end cannot be installed
        f.unlink()
    return cache, argv, proc


@pytest.mark.slow
def test_a_bisect_killed_during_an_install_leaves_no_process_and_the_next_run_clears_its_folder(offline, tmp_path):
    cache, argv, _ = _stopped_during_an_install(offline, tmp_path, signal.SIGKILL)
    left = [p for p in os.listdir(cache / "envs") if p != "mine"]
    assert len(left) == 1 and left[0].startswith("run-"), left  # recognisably bisect's, and incomplete
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 2 and "the good end (chainer==98.0) cannot be probed" in r.stderr, r.stderr
    assert f"removed {left[0]}, left by a bisect that did not finish" in r.stderr, r.stderr
    assert sorted(os.listdir(cache / "envs")) == ["mine"] and (cache / "envs" / "mine" / "notes.txt").exists()


@pytest.mark.slow
def test_a_bisect_interrupted_during_an_install_cleans_up_and_offers_no_resume(offline, tmp_path):
    cache, _, proc = _stopped_during_an_install(offline, tmp_path, signal.SIGINT)
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 130 and "interrupted" in err and "--resume" not in err, err
    assert sorted(os.listdir(cache / "envs")) == ["mine"] and (cache / "envs" / "mine" / "notes.txt").exists()


LSTM_CASE = ROOT / "docs" / "bisect-numpy" / "case-869ae8d1d50c.json"
NSTEP = (str(LSTM_CASE), "--subject", "chainer.NStepLSTM")


def _main(tmp_path: Path, capsys, *argv: str) -> tuple[int, str]:
    """The command line in this process (nothing of a subject runs here before the probes, and no probe is
    reached): its exit code and stderr."""
    from harness.cli import main

    try:
        code = main(["bisect", *argv, "--cache", str(tmp_path / "c")])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_bisect_refuses_bad_input_in_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    ends = ("--good", "numpy==2.2.6", "--bad", "numpy==2.4.6")
    for argv, says in (
            ((*NSTEP, "--good", "numpy=2.2", "--bad", "numpy==2.3.0"), "good='numpy=2.2'"),
            ((*NSTEP, "--good", "numpy==2.2.6", "--bad", "chainer==7.8.1"), "pinned at one end only"),
            ((*NSTEP, "--good", "numpy==2.2.6", "--bad", "numpy==2.2.6"), "the same versions"),
            ((*NSTEP, *ends, "--env", "OPENBLAS_CORETYPE"), "env='OPENBLAS_CORETYPE'"),
            ((str(LSTM_CASE), "--subject", "chainer.EmbedID", *ends),
             "is a lstm case; subject='chainer.EmbedID' takes embed cases"),
            ((*NSTEP, *ends, "--context", "cublas_ws"), "context='cublas_ws'"),
            ((*NSTEP, *ends, "--installer", "uv"), "installer='uv': uv is not on the PATH")):
        if "uv" in argv:
            monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # (python, and no uv, on this PATH)
        code, err = _main(tmp_path, capsys, *argv)
        assert code == 2 and err.startswith("harness: error: ") and says in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "c" / "envs").exists() or os.listdir(tmp_path / "c" / "envs") == []
    (tmp_path / "file").write_text("x")
    r = subprocess.run([sys.executable, "-m", "harness", "bisect", *NSTEP, *ends, "--cache", str(tmp_path / "file")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "cache=" in r.stderr and "is not a directory" in r.stderr, r.stderr


def test_bisect_reads_its_ends_from_two_fingerprints(tmp_path, capsys):
    """Two run directories' environment.json: the packages both list are the pins (here all the same, so
    refused before any work, naming them)."""
    for end in ("good", "bad"):
        (tmp_path / end).mkdir()
        (tmp_path / end / "environment.json").write_text(
            '{"packages": {"numpy": "2.2.6", "chainer": "7.8.1", "pandas": "2.2.%d"}}' % len(end))
    code, err = _main(tmp_path, capsys, *NSTEP, "--good-env", str(tmp_path / "good"), "--bad-env",
                      str(tmp_path / "bad"))
    assert code == 2 and "the two ends pin the same versions (chainer==7.8.1 numpy==2.2.6)" in err, err
