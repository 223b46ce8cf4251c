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

ROOT = Path(__file__).resolve().parents[1]

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
    """A directory holding an executable `nvidia-smi` that prints ``query`` for --query-gpu, else ``banner``."""
    d = tmp / "bin"
    d.mkdir(exist_ok=True)
    (d / "banner.txt").write_text(banner)
    (d / "query.txt").write_text(query)
    exe = d / "nvidia-smi"
    exe.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        here=$(dirname "$0")
        case "$1" in --query-gpu=*) cat "$here/query.txt" ;; *) cat "$here/banner.txt" ;; esac
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


def harness_env(*args: str, path_dir: Path | None, extra: dict[str, str] | None = None):
    env = dict(os.environ)
    env["PATH"] = (str(path_dir) + os.pathsep if path_dir else "") + os.path.dirname(sys.executable) + \
        os.pathsep + "/usr/bin:/bin"
    env.pop("HARNESS_GPU", None)
    env.update(extra or {})
    return subprocess.run([sys.executable, "-m", "harness", "env", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _cupy_usable() -> bool:
    from harness.core.devices import cupy_status

    return cupy_status()[0] is not None


def test_env_check_fails_when_gpu_present_but_unusable(tmp_path):
    if _cupy_usable():
        pytest.skip("CuPy is usable here: the stand-in nvidia-smi cannot make the GPU unusable")
    bindir = fake_smi(tmp_path)
    p = harness_env("--check", path_dir=bindir)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "GPU present but unusable" in p.stderr
    assert "nvidia-smi sees 2 GPU(s) (NVIDIA H200), driver 580.65.06, CUDA 13.0" in p.stderr
    assert "CuPy" in p.stderr
    # make GPU=0 exports HARNESS_GPU=0: the same machine then passes, saying so.
    p = harness_env("--check", path_dir=bindir, extra={"HARNESS_GPU": "0"})
    assert p.returncode == 0, p.stderr
    assert "GPU checks disabled" in p.stdout


def test_env_records_driver_without_cupy(tmp_path):
    p = harness_env("--json", path_dir=fake_smi(tmp_path))
    assert p.returncode == 0, p.stderr
    gpu = json.loads(p.stdout)["gpu"]
    assert gpu["driver_version"] == "580.65.06" and gpu["cuda_version"] == "13.0"
    smi = gpu["nvidia_smi"]["gpus"]
    assert [g["uuid"][:12] for g in smi] == ["GPU-6f1c0a2e", "GPU-7a2d1b3f"]
    assert [g["ecc_mode"] for g in smi] == ["Enabled", "Enabled"]
    assert [g["mig_mode"] for g in smi] == ["Disabled", None]


def test_env_here_says_no_gpu():
    if shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is on PATH here: this test is for machines without one")
    p = harness_env("--check", path_dir=None)
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
