"""GPU detection without a GPU: the nvidia-smi parser on captured-format text, `.ci/gpu-detect.sh`, and
`harness env --check`'s "present but unusable" verdict.

The fake ``nvidia-smi`` written below is a stand-in for the parser and the decision logic only (it prints
text in nvidia-smi's formats); nothing here claims a GPU was used. On a machine with a real nvidia-smi
the tests that need its absence skip with that reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.core.nvsmi import parse_header, parse_query_csv

ROOT = Path(__file__).resolve().parents[3]

BANNER = textwrap.dedent("""\
    Tue Dec  2 10:00:00 2026
    +-----------------------------------------------------------------------------------------+
    | NVIDIA-SMI 580.65.06              Driver Version: 580.65.06      CUDA Version: 13.0     |
    |-----------------------------------------+------------------------+----------------------+
    | GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
    |   0  NVIDIA H200                    On  |   00000000:19:00.0 Off |                    0 |
    +-----------------------------------------+------------------------+----------------------+
    """)
QUERY = ("0, NVIDIA H200, GPU-6f1c0a2e-1111-2222-3333-444455556666, 580.65.06, 00000000:19:00.0, 143771, "
         "Enabled, Disabled\n"
         "1, NVIDIA H200, GPU-7a2d1b3f-1111-2222-3333-444455556666, 580.65.06, 00000000:2A:00.0, 143771, "
         "Enabled, [N/A]\n")


def fake_smi(tmp: Path, banner: str = BANNER, query: str = QUERY, rc: int = 0) -> Path:
    """A directory holding an executable `nvidia-smi` that prints ``query`` for --query-gpu, the GPU list for -L
    (as the real one does), else ``banner``."""
    d = tmp / "bin"
    d.mkdir(exist_ok=True)
    (d / "banner.txt").write_text(banner)
    (d / "query.txt").write_text(query)
    exe = d / "nvidia-smi"
    exe.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        here=$(dirname "$0")
        case "$1" in
          --query-gpu=*) cat "$here/query.txt" ;;
          -L) awk -F', ' '{{print "GPU " $1 ": " $2 " (UUID: " $3 ")"}}' "$here/query.txt" ;;
          *) cat "$here/banner.txt" ;;
        esac
        exit {rc}
        """))
    exe.chmod(0o755)
    return d


def test_parse_query_csv_fields():
    gpus = parse_query_csv(QUERY)
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["name"] == "NVIDIA H200"
    assert gpus[0]["uuid"].startswith("GPU-6f1c0a2e")
    assert gpus[0]["driver_version"] == "580.65.06"
    assert gpus[0]["memory_total_mib"] == 143771
    assert (gpus[0]["ecc_mode"], gpus[0]["mig_mode"]) == ("Enabled", "Disabled")
    assert gpus[1]["mig_mode"] is None  # [N/A]
    with pytest.raises(ValueError, match="fields"):
        parse_query_csv("0, NVIDIA H200\n")


def test_parse_header():
    assert parse_header(BANNER) == {"driver_version": "580.65.06", "cuda_version": "13.0"}
    assert parse_header("no banner") == {"driver_version": None, "cuda_version": None}


def detect(path_dir: Path | None, gpu: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GPU"}
    env["PATH"] = (str(path_dir) + os.pathsep if path_dir else "") + "/usr/bin:/bin"
    if gpu is not None:
        env["GPU"] = gpu
    return subprocess.run(["sh", str(ROOT / ".ci/gpu-detect.sh")], env=env, capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize("banner,query,want", [
    (BANNER, QUERY, "cupy-cuda13x"),
    (BANNER.replace("CUDA Version: 13.0", "CUDA Version: 12.4").replace("580.65.06", "550.54.15"), QUERY,
     "cupy-cuda12x"),
    # No CUDA version in the banner: the driver version and the table decide (R550 runs CUDA 12).
    ("Driver Version: 550.54.15\n", QUERY, "cupy-cuda12x"),
    ("no banner at all\n", "550.54.15\n", "cupy-cuda12x"),
    (BANNER.replace("CUDA Version: 13.0", "CUDA Version: 11.8"), QUERY, ""),
])
def test_gpu_detect_picks_wheel(tmp_path, banner, query, want):
    p = detect(fake_smi(tmp_path, banner, query))
    assert p.returncode == 0
    assert p.stdout.strip() == want
    assert p.stderr.startswith("GPU: ") and len(p.stderr.strip().splitlines()) == 1
    if want:
        assert f"-> {want}" in p.stderr


def test_gpu_detect_disabled_and_absent(tmp_path):
    p = detect(fake_smi(tmp_path), gpu="0")
    assert (p.stdout, p.stderr.strip()) == ("", "GPU: disabled (GPU=0)")
    if shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("a real nvidia-smi is in /usr/bin or /bin: cannot test its absence here")
    p = detect(None)
    assert (p.stdout, p.stderr.strip()) == ("", "GPU: none (nvidia-smi not found)")


def smi_env(path_dir: Path | None, **extra: str | None) -> dict[str, str | None]:
    """The environment of a subprocess whose PATH holds ``path_dir`` (a stand-in nvidia-smi) or no nvidia-smi
    at all (the system's bin directories and this interpreter's only), HARNESS_GPU unset unless given."""
    path = (str(path_dir) + os.pathsep if path_dir else "") + os.path.dirname(sys.executable) + os.pathsep + \
        "/usr/bin:/bin"
    return {"PATH": path, "HARNESS_GPU": None, "HARNESS_ALLOW_UNUSABLE_GPU": None, **extra}


def _cupy_usable() -> bool:
    from harness.core.devices import cupy_status

    return cupy_status()[0] is not None


def test_env_check_fails_when_gpu_present_but_unusable(tmp_path, harness):
    if _cupy_usable():
        pytest.skip("CuPy is usable here: the stand-in nvidia-smi cannot make the GPU unusable")
    bindir = fake_smi(tmp_path)
    p = harness("env", "--check", env=smi_env(bindir))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "GPU present but unusable" in p.stderr
    assert "nvidia-smi sees 2 GPU(s) (NVIDIA H200), driver 580.65.06, CUDA 13.0" in p.stderr
    assert "CuPy" in p.stderr
    # make GPU=0 exports HARNESS_GPU=0: the same machine then passes, saying so.
    p = harness("env", "--check", env=smi_env(bindir, HARNESS_GPU="0"))
    assert p.returncode == 0, p.stderr
    assert "GPU checks disabled" in p.stdout


PROBE_TEST = textwrap.dedent("""\
    def test_runs_on_each_device(device):
        assert device.id in ("cpu", "gpu:0")
    """)


def run_pytest(tmp_path: Path, env: dict[str, str | None]) -> subprocess.CompletedProcess:
    """A one-test pytest session with the harness plugin (as ``make test`` loads it) in its own directory."""
    d = tmp_path / "session"
    d.mkdir(exist_ok=True)
    (d / "test_probe.py").write_text(PROBE_TEST)
    full = {k: v for k, v in os.environ.items() if k not in env or env[k] is not None}
    full.update({k: v for k, v in env.items() if v is not None})
    full["PYTHONPATH"] = str(ROOT) + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    full["HARNESS_PROFILE"] = "ci"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin", "-p", "no:cacheprovider",
                           "-rs", "test_probe.py"], cwd=d, env=full, capture_output=True, text=True, timeout=180)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_one_gpu_rule_for_env_check_and_the_pytest_plugin(tmp_path, harness):
    """With make GPU=0 on a machine whose GPU CuPy cannot use, `harness env --check` and the pytest plug-in
    agree: both ask harness.core.devices.gpu_problem (one passing while the other stops is the failure)."""
    if _cupy_usable():
        pytest.skip("CuPy is usable here: the stand-in nvidia-smi cannot make the GPU unusable")
    bindir = fake_smi(tmp_path)
    check = harness("env", "--check", env=smi_env(bindir))
    session = run_pytest(tmp_path, smi_env(bindir))
    assert check.returncode == 2 and session.returncode == 4, session.stdout + session.stderr  # 4: usage error
    problem = next(ln for ln in check.stderr.splitlines() if "GPU present but unusable" in ln)
    assert problem.removeprefix("harness: ") in session.stderr  # the same line, from the one rule
    # make GPU=0 (HARNESS_GPU=0): both pass; the GPU test is skipped with that reason, the CPU one runs
    check = harness("env", "--check", env=smi_env(bindir, HARNESS_GPU="0"))
    session = run_pytest(tmp_path, smi_env(bindir, HARNESS_GPU="0"))
    assert check.returncode == 0, check.stderr
    assert session.returncode == 0, session.stdout + session.stderr
    assert "1 passed, 1 skipped" in session.stdout and "GPU checks disabled (HARNESS_GPU=0" in session.stdout


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_without_nvidia_smi_every_output_says_so(tmp_path, harness):
    """Where there is no NVIDIA GPU at all, the reason is that, not what CuPy lacks."""
    if shutil.which("nvidia-smi", path="/usr/bin:/bin") or _cupy_usable():
        pytest.skip("a real nvidia-smi or a usable CuPy is here: this test is for machines without a GPU")
    want, wrong = "no GPU: nvidia-smi not found", "CuPy is not installed"
    from harness.core.devices import Device, gpu_reason

    assert gpu_reason() == want and Device("gpu", 0).availability() == (False, want)
    case = tmp_path / "case.json"
    case.write_text('{"family": "embed", "seed": 1, "spec": {"vocab": 4, "width": 2, "ids_shape": [3]}}')
    outs = {"env --check": harness("env", "--check", env=smi_env(None)),
            "replay --device gpu": harness("replay", str(case), "--subject", "chainer.embed_id", "--device", "gpu",
                                           env=smi_env(None)),
            "audit --devices gpu": harness("audit", "--devices", "gpu", "--out", str(tmp_path / "a.json"),
                                           env=smi_env(None))}
    for what, p in outs.items():
        assert want in p.stdout + p.stderr and wrong not in p.stderr, (what, p.stdout, p.stderr)
    assert outs["replay --device gpu"].returncode == 2 and outs["audit --devices gpu"].returncode == 2
    session = run_pytest(tmp_path, smi_env(None))
    assert session.returncode == 0 and "1 passed, 1 skipped" in session.stdout, session.stdout
    assert f"SKIPPED [1] test_probe.py: {want}" in session.stdout and f"gpu:0 (skipped: {want})" in session.stdout
    assert wrong not in session.stdout


def test_env_records_driver_without_cupy(tmp_path, harness):
    p = harness("env", "--json", env=smi_env(fake_smi(tmp_path)))
    assert p.returncode == 0, p.stderr
    gpu = json.loads(p.stdout)["gpu"]
    assert gpu["driver_version"] == "580.65.06" and gpu["cuda_version"] == "13.0"
    smi = gpu["nvidia_smi"]["gpus"]
    assert [g["uuid"][:12] for g in smi] == ["GPU-6f1c0a2e", "GPU-7a2d1b3f"]
    assert [g["ecc_mode"] for g in smi] == ["Enabled", "Enabled"]
    assert [g["mig_mode"] for g in smi] == ["Disabled", None]


def test_env_here_says_no_gpu(harness):
    if shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is on PATH here: this test is for machines without one")
    p = harness("env", "--check", env=smi_env(None))
    assert p.returncode == 0, p.stderr
    assert "gpu: no GPU: nvidia-smi not found" in p.stdout
    from harness.core.devices import gpu_presence

    assert gpu_presence() == ("absent", "no GPU: nvidia-smi not found")


def test_cluster_record_names_the_physical_gpu(tmp_path, monkeypatch):
    """`gpu:N` on a Dask worker -> the nvidia-smi GPU it is, through CUDA_VISIBLE_DEVICES (dask-cuda sets
    one per worker). The stand-in nvidia-smi supplies the table."""
    from harness.core.nvsmi import query_gpus
    from harness.execute.cluster import _gpu_of

    monkeypatch.setenv("PATH", str(fake_smi(tmp_path)) + os.pathsep + os.environ["PATH"])
    query_gpus.cache_clear()
    try:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        assert _gpu_of("gpu:1")["uuid"].startswith("GPU-7a2d1b3f")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        got = _gpu_of("gpu:0")
        assert (got["index"], got["name"], got["uuid"][:12]) == (1, "NVIDIA H200", "GPU-7a2d1b3f")
        assert _gpu_of("cpu") is None
    finally:
        query_gpus.cache_clear()
