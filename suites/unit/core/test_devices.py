"""harness/core/devices.py without a GPU: the path a GPU machine takes, through stand-ins for CuPy."""

from __future__ import annotations

import types

from harness.core import devices


def _fake_cupy(n: int) -> object:
    runtime = types.SimpleNamespace(getDeviceCount=lambda: n)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime), __version__="14.0")


def test_a_usable_gpu_is_available_with_cupys_reason(monkeypatch):
    monkeypatch.setattr(devices, "gpu_reason", lambda: None)
    monkeypatch.setattr(devices, "cupy_status", lambda: (_fake_cupy(2), "CuPy 14.0, 2 CUDA device(s)"))
    assert devices.parse_device("gpu:1").availability() == (True, "CuPy 14.0, 2 CUDA device(s)")
    ok, why = devices.parse_device("gpu:2").availability()
    assert not ok and why == "no GPU 2: only 2 CUDA device(s)"


def test_no_gpu_gives_the_one_reason(monkeypatch):
    monkeypatch.setattr(devices, "gpu_reason", lambda: "no GPU: nvidia-smi not found")
    assert devices.parse_device("gpu:0").availability() == (False, "no GPU: nvidia-smi not found")
    assert devices.parse_device("cpu").availability()[0]
