"""The environment fingerprint: ``python -m harness env --json`` / ``--check`` (harness/core/env.py).

Every call is a subprocess (the ``harness`` fixture of suites/conftest.py) so the environment variables and a
fake CuPy can be set for it alone.
The fake CuPy lives in a temporary directory put first on PYTHONPATH; its
``cuda.runtime.getDeviceCount()`` raises the error a CuPy without a driver raises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 120
NO_DEVICE = "cudaErrorNoDevice: no CUDA-capable device is detected"


def real_gpu() -> bool:
    from harness.core.devices import cupy_status

    return cupy_status()[0] is not None


@pytest.fixture(scope="module")
def fingerprint(harness) -> dict:
    env = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "CUPY_TF32": "1", "PYTHONHASHSEED": "5"}
    p = harness("env", "--json", env=env)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    return json.loads(p.stdout)


def test_env_json_versions(fingerprint):
    import numpy

    assert fingerprint["python"] == sys.version.split()[0]
    pk = fingerprint["packages"]
    for name in ("numpy", "chainer", "cupy", "espnet", "pandas", "hypothesis"):
        assert name in pk, name
    assert pk["numpy"] == numpy.__version__ and int(pk["numpy"].split(".")[0]) >= 2
    assert pk["chainer"] == "7.8.1"
    assert pk["espnet"] == "202511"
    assert pk["pandas"] and pk["hypothesis"]
    assert fingerprint["espnet_module"] == "espnet.nets.chainer_backend.deterministic_embed_id"
    assert fingerprint["problems"] == []


def test_env_json_compat_and_chainer_config(fingerprint):
    from harness.core import compat

    patches = fingerprint["compat_patches"]
    assert isinstance(patches, list) and "numpy.sctypes" in patches  # NumPy 2 lacks it
    assert {"numpy.distutils.system_info", "pkg_resources"} <= set(patches)  # stand-ins on every Python
    assert set(patches) <= {p.name for p in compat.PATCHES}
    ch = fingerprint["chainer"]
    assert ch["usable"] is True and ch["version"] == "7.8.1"
    cfg = ch["config"]
    for key in ("cudnn_deterministic", "use_cudnn", "debug", "dtype"):
        assert key in cfg, key
    assert cfg["debug"] == "False" and cfg["dtype"] == "float32" and cfg["use_cudnn"] == "auto"


def test_env_json_blas_and_cpu(fingerprint):
    blas = fingerprint["blas"]
    assert isinstance(blas, list) and blas, "threadpoolctl found no BLAS: NumPy always loads one"
    for lib in blas:
        assert lib["internal_api"] and lib["version"] is not None
        assert isinstance(lib["num_threads"], int) and lib["num_threads"] >= 1
    cpu = fingerprint["cpu"]
    assert cpu["model"] and isinstance(cpu["model"], str)
    assert cpu["cores"] == os.cpu_count()


def test_env_json_records_result_changing_variables(fingerprint):
    env = fingerprint["env"]
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert env["CUPY_TF32"] == "1"
    assert env["PYTHONHASHSEED"] == "5"
    # Negative control: variables that cannot change results are not recorded.
    assert "HOME" not in env and "PATH" not in env


def test_env_json_variables_absent_when_unset(harness):
    p = harness("env", "--json", env=dict.fromkeys(("CUBLAS_WORKSPACE_CONFIG", "CUPY_TF32", "PYTHONHASHSEED")))
    assert p.returncode == 0, p.stderr
    env = json.loads(p.stdout)["env"]
    assert "CUBLAS_WORKSPACE_CONFIG" not in env and "CUPY_TF32" not in env and "PYTHONHASHSEED" not in env


def test_env_json_gpu_part(fingerprint):
    gpu = fingerprint["gpu"]
    if real_gpu():
        assert gpu["available"] is True and gpu["devices"], gpu
        return
    assert gpu["available"] is False
    assert gpu["reason"] and "\n" not in gpu["reason"], gpu
    assert gpu["devices"] == []


def test_env_check_exits_0_with_one_line(harness):
    p = harness("env", "--check")
    assert p.returncode == 0, (p.stdout, p.stderr)
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, p.stdout
    assert lines[0].startswith("harness env: chainer 7.8.1, numpy 2.")
    assert "espnet 202511" in lines[0] and "gpu:" in lines[0]
    assert "Traceback" not in p.stderr


def test_env_plain_text_is_flat_key_value(harness):
    p = harness("env")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    keys = {ln.split()[0] for ln in lines if ln.strip()}
    assert {"python", "packages.chainer", "chainer.config.debug", "gpu.available"} <= keys


@pytest.fixture(scope="module")
def blind_cupy(tmp_path_factory) -> str:
    """A directory holding a CuPy that imports but cannot see a driver."""
    d = tmp_path_factory.mktemp("blind_cupy")
    (d / "cupy" / "cuda").mkdir(parents=True)
    (d / "cupy" / "__init__.py").write_text('__version__ = "13.99.0"\nfrom cupy import cuda  # noqa\n')
    (d / "cupy" / "cuda" / "__init__.py").write_text("from cupy.cuda import runtime  # noqa\n")
    (d / "cupy" / "cuda" / "runtime.py").write_text(textwrap.dedent(f"""
        def getDeviceCount():
            raise RuntimeError({NO_DEVICE!r})
    """))
    return str(d)


def test_blind_cupy_reads_unavailable_with_the_reason(blind_cupy, harness):
    p = harness("env", "--json", pythonpath=blind_cupy)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    fp = json.loads(p.stdout)
    gpu = fp["gpu"]
    assert gpu["available"] is False, gpu
    assert NO_DEVICE in gpu["reason"] and "13.99.0" in gpu["reason"] and "\n" not in gpu["reason"], gpu
    assert any(NO_DEVICE in pr for pr in fp["problems"])
    assert fp["chainer"]["usable"] is True  # CPU work is unaffected


def test_blind_cupy_env_check_one_line_no_traceback(blind_cupy, harness):
    p = harness("env", "--check", pythonpath=blind_cupy)
    assert "Traceback" not in p.stderr + p.stdout
    assert p.returncode == 0, (p.stdout, p.stderr)  # the CPU subjects still run
    out = p.stdout.strip().splitlines()
    assert len(out) == 1 and NO_DEVICE in out[0], p.stdout
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("harness: ") and NO_DEVICE in err[0], p.stderr


def test_blind_cupy_gpu_device_unavailable(blind_cupy):
    code = textwrap.dedent("""
        import json
        from harness.core.devices import Device
        from harness.core.cases import Case
        from harness.core.contexts import get_context
        from harness.subjects.base import execute
        from harness.subjects.registry import get_subject
        ok, reason = Device("gpu", 0).availability()
        case = Case("embed", 1, {"vocab": 4, "width": 2, "ids_shape": [3]})
        r = execute(get_subject("chainer.embed_id"), case, Device("gpu", 0), get_context("default"))
        print(json.dumps({"ok": ok, "reason": reason, "status": r.status, "skip": r.skip_reason}))
    """)
    env = {**os.environ, "PYTHONPATH": blind_cupy + os.pathsep + str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["ok"] is False and NO_DEVICE in out["reason"], out
    assert out["status"] == "skipped" and NO_DEVICE in out["skip"], out


def test_environment_diff_names_what_differs_likeliest_cause_first():
    import doctest

    from harness.core import env as E

    assert doctest.testmod(E).failed == 0
    a = {"gpu": {"driver_version": "550.1"}, "env": {"OMP_NUM_THREADS": "1"}, "python": "3.11.7",
         "blas": [{"num_threads": 2}]}
    b = {"gpu": {"driver_version": "570.9"}, "env": {}, "python": "3.11.7", "blas": [{"num_threads": 2}]}
    d = E.environment_diff(a, b)
    assert [tuple(x) for x in d] == [("gpu.driver_version", "GPU driver", "550.1", "570.9"),
                                     ("env.OMP_NUM_THREADS", "environment variable", "1", "(absent)"),
                                     ("env", "other", "(absent)", "{}")]
    assert E.environment_diff(a, a) == []


def test_env_json_records_the_worker_defaults_and_the_users_value_wins(harness, fingerprint):
    from harness.core.env import WORKER_ENV_DEFAULTS

    assert fingerprint["env"]["OPENBLAS_THREAD_TIMEOUT"] == WORKER_ENV_DEFAULTS["OPENBLAS_THREAD_TIMEOUT"]
    p = harness("env", "--json", env={"OPENBLAS_THREAD_TIMEOUT": "28"})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["env"]["OPENBLAS_THREAD_TIMEOUT"] == "28"


def test_worker_env_puts_the_defaults_under_the_environment_and_the_overrides(monkeypatch):
    from harness.core.env import WORKER_ENV_DEFAULTS
    from harness.execute.zygote import worker_env

    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    assert worker_env({})["OPENBLAS_THREAD_TIMEOUT"] == WORKER_ENV_DEFAULTS["OPENBLAS_THREAD_TIMEOUT"]
    assert worker_env({"OPENBLAS_THREAD_TIMEOUT": "12"})["OPENBLAS_THREAD_TIMEOUT"] == "12"
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "20")
    assert worker_env({})["OPENBLAS_THREAD_TIMEOUT"] == "20"


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenBLAS runs one thread, nothing to compare")
def test_openblas_thread_timeout_leaves_the_bits_alone():
    """The worker default only changes how OpenBLAS's idle threads wait: an NStepLSTM run whose bits depend on
    the thread count (1 against 2: the control, so the test can fail) has the same digests with OpenBLAS's own
    spin (2**28 cycles) as with the worker default."""
    from harness.execute.worker import Worker
    from harness.generate.corpora import anchor_cases

    case = next(c for c in anchor_cases() if c.family == "lstm" and c.seed == 21)
    envs = {"default": {}, "spin": {"OPENBLAS_THREAD_TIMEOUT": "28"}, "one thread": {"OPENBLAS_NUM_THREADS": "1"}}
    digests = {}
    for label, env in envs.items():
        w = Worker(env=env).start()
        try:
            answer = w.run_answer(case.to_json(), "chainer.NStepLSTM", "cpu", "default", TIMEOUT)
        finally:
            w.close()
        assert answer.result.status == "ok", (label, answer.result.error)
        digests[label] = {name: meta["digest"] for name, meta in answer.tensors.items()}
    assert len(digests["default"]) >= 5
    assert digests["default"] != digests["one thread"], "the case's bits no longer depend on the thread count"
    assert digests["default"] == digests["spin"]
