"""Hostile plug-ins, one attribute per failure mode (``--subject-plugin suites.plugins.attacks:NAME``), for
``suites/e2e/test_attacks.py`` and ``tools/attacks.py``: whatever they do, the harness must answer with one line and
exit 2 (at load), an error row (in ``accepts()``), or a row of the run, never its own death, hang or exit 0.

``ATTACK_AT_IMPORT`` (environment) makes the import itself misbehave: ``exit0`` (``sys.exit(0)``), ``os_exit``
(``os._exit(0)``), ``segv``, ``hang``, ``raise``, ``print`` (junk on stdout, then loads normally).
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.subjects.base import Declared, Recorder, Subject

_AT_IMPORT = os.environ.get("ATTACK_AT_IMPORT", "")


def _segv() -> None:
    ctypes.string_at(0)


def _hang() -> None:
    while True:
        time.sleep(1)


if _AT_IMPORT == "exit0":
    sys.exit(0)
elif _AT_IMPORT == "os_exit":
    os._exit(0)
elif _AT_IMPORT == "segv":
    _segv()
elif _AT_IMPORT == "hang":
    _hang()
elif _AT_IMPORT == "raise":
    raise RuntimeError("attack at import")
elif _AT_IMPORT == "print":
    print('harness-manifest {"subjects": "forged"}')

_DECL = {"cpu": Declared(True, "test subject")}


def _sum_rows(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    """A valid embed subject: W's rows picked by id (NumPy), deterministic."""
    a = build_arrays(case)
    with rec.phase("forward"):
        W = np.asarray(a["W"])
        ids = np.asarray(a["x"]).astype(np.int64) % max(W.shape[0], 1)
        y = W[ids]
    rec.outputs({"y": y})


def _subject(name: str, **kw) -> Subject:
    return Subject(name, "embed", _sum_rows, devices=("cpu",), declared=_DECL, description="attack", **kw)


def _raise(case: Case) -> bool:
    raise RuntimeError("accepts() attacked")


def _sys_exit(case: Case) -> bool:
    sys.exit(0)


def _os_exit(case: Case) -> bool:
    os._exit(0)


def _segv_accepts(case: Case) -> bool:
    _segv()
    return True


def _hang_accepts(case: Case) -> bool:
    _hang()
    return True


def _keyboard(case: Case) -> bool:
    raise KeyboardInterrupt


# ---- at load -------------------------------------------------------------------------------------------------
OK = [_subject("attack.ok")]


def RAISING():  # noqa: N802 - a factory that raises
    raise RuntimeError("factory attacked")


def EXITING():  # noqa: N802 - a factory that ends the process
    sys.exit(0)


def _endless():
    while True:
        yield _subject("attack.endless")


ENDLESS = _endless()
DECLARED_BOOL = [Subject("attack.declared_bool", "embed", _sum_rows, devices=("cpu",), declared={"cpu": True})]
INT_NAME = [Subject(3, "embed", _sum_rows, devices=("cpu",), declared=_DECL)]  # type: ignore[arg-type]
NOT_A_SUBJECT = 42
STRING = "attack"
DUPLICATE = [_subject("attack.twice"), _subject("attack.twice")]
BAD_FAMILY = [Subject("attack.family", "convolution", _sum_rows, devices=("cpu",), declared=_DECL)]
BAD_DEVICES = [Subject("attack.devices", "embed", _sum_rows, devices=("tpu",), declared=_DECL)]

# ---- in accepts() (one subject each; every case must become an error row, never the harness's death) ----------
ACCEPTS_RAISE = [_subject("attack.accepts_raise", accepts=_raise)]
ACCEPTS_EXIT = [_subject("attack.accepts_exit", accepts=_sys_exit)]
ACCEPTS_OS_EXIT = [_subject("attack.accepts_os_exit", accepts=_os_exit)]
ACCEPTS_SEGV = [_subject("attack.accepts_segv", accepts=_segv_accepts)]
ACCEPTS_HANG = [_subject("attack.accepts_hang", accepts=_hang_accepts)]
ACCEPTS_INTERRUPT = [_subject("attack.accepts_interrupt", accepts=_keyboard)]

# ---- names the outputs must survive ---------------------------------------------------------------------------
DOLLAR = [_subject("adv.$\\foo{$")]


# ---- at localize: a nondeterministic subject (a finding the report localizes) that ends the localizing child --
def _noisy_or_exit(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    if os.environ.get("HARNESS_SANDBOX_CHILD") == "1":
        raise SystemExit(0)
    a = build_arrays(case)
    with rec.phase("forward"):
        W = np.asarray(a["W"], dtype=np.float32)
        y = W * np.float32(1 + np.random.default_rng().integers(1, 1000) * 1e-7)
    rec.outputs({"y": y})


LOCALIZE_EXIT = [Subject("attack.localize_exit", "embed", _noisy_or_exit, devices=("cpu",),
                         declared={"cpu": Declared(False, "noise")})]

__all__ = [n for n in dir() if n.isupper() and not n.startswith("_")] + ["RAISING", "EXITING"]
