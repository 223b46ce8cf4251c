"""The fixed part of a script ``harness export`` writes: it imports only the standard library and NumPy.

``harness export`` copies this module's source verbatim into the script (after the script's header), then the
library calls (:mod:`harness.subjects.calls`), then the data: the case, its arrays, the claim and what judges it.
Nothing here may import the harness (a test checks it): the script must run where only NumPy, Chainer and what
the subject needs are installed. Chainer 7.8.1 needs three small shims on NumPy 2 / Python 3.12
(:func:`chainer_shims`); they are written here afresh, in their smallest form, for the same reasons
``harness/core/compat.py`` lists.

The claim is checked by :func:`main`, one of :data:`CHECKS`: it prints a short account and returns 1 while the
defect is there, 0 when it is gone, 2 when it cannot be checked here (a package or the GPU missing).
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import types
import warnings
import zlib

import numpy as np


class CannotRun(Exception):
    """The script cannot check its claim on this machine (exit 2)."""


# ---- Chainer 7.8.1 on today's NumPy and Python ------------------------------------------------------------
def chainer_shims() -> list[str]:
    """What Chainer 7.8.1 reads at import time and NumPy 2 / Python 3.12 / setuptools >= 80 no longer have:
    ``numpy.sctypes`` (chainer/functions/array/as_strided.py), ``numpy.distutils.system_info`` and
    ``pkg_resources`` (chainer/_environment_check.py). Each is added only where it is missing."""
    added = []
    if "sctypes" not in np.__dict__:
        np.sctypes = {"int": [np.int8, np.int16, np.int32, np.int64],  # type: ignore[attr-defined]
                      "uint": [np.uint8, np.uint16, np.uint32, np.uint64],
                      "float": [np.float16, np.float32, np.float64, np.longdouble],
                      "complex": [np.complex64, np.complex128, np.clongdouble],
                      "others": [bool, object, bytes, str, np.void]}
        added.append("numpy.sctypes")
    try:
        with warnings.catch_warnings():  # numpy.distutils, where it still exists, warns that it is deprecated
            warnings.simplefilter("ignore")
            import numpy.distutils.system_info  # noqa: F401
    except ImportError:
        info = types.ModuleType("numpy.distutils.system_info")
        info.get_info = lambda name, notfound_action=0: {}  # type: ignore[attr-defined]
        parent = sys.modules.get("numpy.distutils") or types.ModuleType("numpy.distutils")
        parent.__path__ = []  # type: ignore[attr-defined]
        parent.system_info = info  # type: ignore[attr-defined]
        sys.modules.update({"numpy.distutils": parent, "numpy.distutils.system_info": info})
        added.append("numpy.distutils.system_info")
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        import importlib.metadata as md

        pr = types.ModuleType("pkg_resources")
        pr.ResolutionError = Exception  # type: ignore[attr-defined]
        pr.DistributionNotFound = type("DistributionNotFound", (Exception,), {})  # type: ignore[attr-defined]
        pr.VersionConflict = type("VersionConflict", (Exception,), {})  # type: ignore[attr-defined]

        def require(requirement: str) -> list:
            name = requirement
            for sep in "<>=!~;[ ":
                name = name.split(sep, 1)[0]
            try:
                md.version(name)
            except md.PackageNotFoundError as exc:
                raise pr.DistributionNotFound(requirement) from exc  # type: ignore[attr-defined]
            return []

        pr.require = require  # type: ignore[attr-defined]
        pr.get_distribution = lambda name: types.SimpleNamespace(  # type: ignore[attr-defined]
            project_name=name, version=md.version(name))
        sys.modules["pkg_resources"] = pr
        added.append("pkg_resources")
    return added


def import_chainer() -> types.ModuleType:
    chainer_shims()
    try:
        import chainer
    except ImportError as exc:
        raise CannotRun(f"chainer cannot be imported ({exc}): pip install chainer==7.8.1") from exc
    return chainer


# ---- arrays ------------------------------------------------------------------------------------------------
def pack(arrays: dict) -> str:
    """Arrays as base64 text of a zlib-compressed .npz (bit for bit, dtypes and shapes kept)."""
    buf = io.BytesIO()
    np.savez(buf, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
    text = base64.b64encode(zlib.compress(buf.getvalue(), 9)).decode("ascii")
    return "\n".join(text[i:i + 100] for i in range(0, len(text), 100))


def unpack(text: str) -> dict:
    if not text.strip():
        return {}
    with np.load(io.BytesIO(zlib.decompress(base64.b64decode("".join(text.split())))), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def first_difference(a: np.ndarray, b: np.ndarray) -> str | None:
    """None where ``a`` and ``b`` hold the same bits; else where and how they first differ."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    ua = np.ascontiguousarray(a).view(np.uint8).reshape(a.size, -1) if a.size else np.zeros((0, 1), np.uint8)
    ub = np.ascontiguousarray(b).view(np.uint8).reshape(b.size, -1) if b.size else np.zeros((0, 1), np.uint8)
    diff = np.nonzero((ua != ub).any(axis=1))[0]
    if not diff.size:
        return None
    i = int(diff[0])
    idx = tuple(int(n) for n in np.unravel_index(i, a.shape)) if a.shape else ()
    return (f"{diff.size} of {a.size} elements differ; first at {idx}: {a.reshape(-1)[i]!r} vs "
            f"{b.reshape(-1)[i]!r} (bits {ua[i].tobytes()[::-1].hex()} vs {ub[i].tobytes()[::-1].hex()})")


# ---- one run -----------------------------------------------------------------------------------------------
class Env:
    """What a library call needs (the same names the harness's subjects give it)."""

    def __init__(self, chainer: types.ModuleType, device: str, case: dict, context: dict) -> None:
        self.chainer = chainer
        self.device = device
        self.phase_name = "setup"
        self.case_seed = int(case["seed"])
        self.context = context
        if device == "cpu":
            self.xp = np
        else:
            try:
                import cupy
                cupy.cuda.runtime.getDeviceCount()
            except Exception as exc:  # noqa: BLE001 - no CuPy, no driver, no GPU: all the same here
                raise CannotRun(f"this case runs on the GPU ({device}) and CuPy cannot use one here: "
                                f"{type(exc).__name__}: {exc}") from exc
            self.xp = cupy
        self.receives_gradient = receives_gradient  # noqa: F821 - defined further down in the script
        self.calls = sys.modules[__name__]  # the shipped calls are defined further down in the script

    @contextlib.contextmanager
    def phase(self, name: str):  # type: ignore[no-untyped-def]
        self.phase_name = name
        yield

    def to_device(self, link) -> None:  # type: ignore[no-untyped-def]
        link.to_device(self.chainer.get_device("@numpy" if self.device == "cpu" else
                                               f"@cupy:{self.device.partition(':')[2] or 0}"))

    def seed(self, n: int) -> None:
        np.random.seed(n % 2**32)
        if self.xp is not np:
            self.xp.random.seed(n % 2**32)

    def espnet(self) -> types.ModuleType:
        try:
            return importlib.import_module(ESPNET_MODULE)  # noqa: F821 - the script's data
        except ImportError as exc:
            raise CannotRun(f"{ESPNET_MODULE} cannot be imported ({exc}): pip install espnet --no-deps") from exc  # noqa: F821


def host(value) -> np.ndarray:  # type: ignore[no-untyped-def]
    get = getattr(value, "get", None)
    return np.ascontiguousarray(value if isinstance(value, np.ndarray) else get() if get else np.asarray(value))


def run_once(case: dict, arrays: dict, device: str, context: dict, call, params: dict) -> tuple[dict, dict | None]:  # type: ignore[no-untyped-def]
    """One run of the library call here: its outputs (host arrays) and its error (type, phase, message) or
    None. BLAS threads are limited with threadpoolctl where it is installed (else the child process that runs
    this context had them set in its environment before NumPy loaded BLAS)."""
    chainer = import_chainer()
    env = Env(chainer, device, case, context)
    outputs: dict = {}

    def emit(name: str, value) -> None:  # type: ignore[no-untyped-def]
        data = getattr(value, "array", value)
        if data is not None:
            outputs[name] = data

    a = {k: (env.xp.asarray(v) if env.xp is not np else np.array(v, copy=True)) for k, v in arrays.items()}
    with contextlib.ExitStack() as stack:
        if context.get("blas_threads"):
            try:
                from threadpoolctl import threadpool_limits
                stack.enter_context(threadpool_limits(limits=int(context["blas_threads"]), user_api="blas"))
            except ImportError:
                pass
        for key, value in (context.get("chainer_config") or {}).items():
            stack.enter_context(chainer.using_config(key, value))
        try:
            call(env, a, case["spec"], emit, **params)
            env.phase_name = "transfer"
            return {k: host(v) for k, v in outputs.items()}, None
        except CannotRun:
            raise
        except Exception as exc:  # noqa: BLE001 - the error is what some claims are about
            message = (str(exc).strip().splitlines() or [""])[0][:300]
            return {}, {"type": type(exc).__name__, "phase": env.phase_name, "message": message}


def _child_env(context: dict) -> dict:
    env = dict(os.environ)
    env.update({k: str(v) for k, v in (context.get("env") or {}).items()})
    if context.get("blas_threads"):  # set before NumPy loads BLAS, for a machine without threadpoolctl
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(context["blas_threads"])
    return env


def run_in_child(case_name: str, device: str, context: dict) -> tuple[dict, dict | None]:
    """One run in a new Python process of this very script (``--child``): the context's environment variables
    are set before it imports anything."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npz")
        # The child runs as this process does (isolated or not: PYTHONPATH may be how the library is found),
        # except that a context which sets a PYTHON* variable needs the interpreter to read it.
        python_vars = any(k.startswith("PYTHON") for k in (context.get("env") or {}))
        flags = ["-I"] if sys.flags.isolated and not python_vars else []
        argv = [sys.executable, *flags, os.path.abspath(__file__), "--child",
                json.dumps({"case": case_name, "device": device, "context": context, "out": out})]
        p = subprocess.run(argv, env=_child_env(context), capture_output=True, text=True)
        if p.returncode == 2:
            raise CannotRun(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr.strip()[-300:])
        if p.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"the child process failed (exit {p.returncode}): {p.stderr.strip()[-800:]}")
        with np.load(out, allow_pickle=False) as z:
            outputs = {k: z[k] for k in z.files if k != "__error__"}
            error = json.loads(str(z["__error__"])) if "__error__" in z.files else None
    return outputs, error


def child_main(request: str) -> int:
    r = json.loads(request)
    try:
        outputs, error = run_once(CASES[r["case"]], ARRAYS[r["case"]], r["device"], r["context"],  # noqa: F821
                                  globals()[CALL], PARAMS)  # noqa: F821
    except CannotRun as exc:
        print(f"cannot check here: {exc}")
        return 2
    extra = {} if error is None else {"__error__": np.array(json.dumps(error))}
    np.savez(r["out"], **outputs, **extra)
    return 0


def run_side(case_name: str, device: str, context: dict, child: bool = False) -> tuple[dict, dict | None]:
    """One run, in this process unless the context needs its environment set before start-up (or ``child``)."""
    if child or context.get("env"):
        return run_in_child(case_name, device, context)
    return run_once(CASES[case_name], ARRAYS[case_name], device, context, globals()[CALL], PARAMS)  # noqa: F821


# ---- the claims --------------------------------------------------------------------------------------------
def _claimed(name: str) -> bool:
    kind = CLAIM.get("tensor_kind") or ""  # noqa: F821
    return not kind or tensor_kind(name) == kind  # noqa: F821


def _error_text(error: dict | None) -> str:
    return "no error" if error is None else f"{error['type']} in {error['phase']}: {error['message']}"


def _compare_runs(labels: list, runs: list) -> int:
    """Every run's outputs against the first run's, bit for bit; 1 where a claimed tensor differs (the first
    few differences printed)."""
    first, first_error = runs[0]
    lines: list = []
    found = 0
    for label, (outputs, error) in zip(labels[1:], runs[1:]):
        if (error is None) != (first_error is None):
            lines.append(f"  {label}: {_error_text(error)}, but {labels[0]}: {_error_text(first_error)}")
            found += 1
            continue
        for name in sorted(set(first) | set(outputs)):
            if name not in first or name not in outputs:
                lines.append(f"  {name}: only in one of {labels[0]} and {label}")
                found += _claimed(name)
                continue
            d = first_difference(first[name], outputs[name])
            if d is not None:
                lines.append(f"  {name} ({first[name].dtype}{first[name].shape}), {labels[0]} vs {label}: {d}")
                found += _claimed(name)
    for line in lines[:6]:
        print(line)
    if len(lines) > 6:
        print(f"  ... and {len(lines) - 6} more")
    if not lines:
        print(f"  bit-identical: {', '.join(labels)}")
    return int(found > 0)


def check_repeats() -> int:
    n = int(CLAIM.get("repeats") or 20)  # noqa: F821
    print(f"claim: two runs of the same call on the same inputs give different bits ({n} runs, one process)")
    runs = [run_side("case", CLAIM["device"], CLAIM["context"]) for _ in range(n)]  # noqa: F821
    return _compare_runs([f"run {i}" for i in range(n)], runs)


def check_processes() -> int:
    n = max(2, int(CLAIM.get("fresh") or 3))  # noqa: F821
    print(f"claim: the same call gives different bits in different processes ({n} fresh processes)")
    runs = [run_side("case", CLAIM["device"], CLAIM["context"], child=True) for _ in range(n)]  # noqa: F821
    return _compare_runs([f"process {i}" for i in range(n)], runs)


def check_contexts() -> int:
    (na, ca), (nb, cb) = CLAIM["contexts"]  # noqa: F821
    print(f"claim: context {nb} ({cb.get('description', '')}) gives other bits than context {na} "
          f"({ca.get('description', '')}); each runs in its own process")
    runs = [run_side("case", CLAIM["device"], c, child=True) for c in (ca, cb)]  # noqa: F821
    return _compare_runs([f"context {na}", f"context {nb}"], runs)


def check_devices() -> int:
    da, db = CLAIM["devices"]  # noqa: F821
    print(f"claim: device {db} gives other bits than device {da}")
    runs = [run_side("case", d, CLAIM["context"]) for d in (da, db)]  # noqa: F821
    return _compare_runs([f"device {da}", f"device {db}"], runs)


def check_error() -> int:
    want = CLAIM["error"]  # noqa: F821
    print(f"claim: the call raises {want['type']} in {want['phase']}")
    outputs, error = run_side("case", CLAIM["device"], CLAIM["context"])  # noqa: F821
    print(f"  outcome: {_error_text(error)}")
    if error is not None and error["type"] == want["type"] and error["phase"] == want["phase"]:
        return 1
    return 0


def check_bad_input() -> int:
    rule = CLAIM["rule"]  # noqa: F821
    print(f"claim: on this bad input the call does not do what it must: {rule['describe']} ({rule['source']})")
    outputs, error = run_side("case", CLAIM["device"], CLAIM["context"])  # noqa: F821
    print(f"  outcome: {_error_text(error)}")
    if error is None:
        ok = rule["no_error_ok"]
    elif error["type"] not in rule["errors"]:
        ok = False
    else:
        phases = rule["phases"].get(error["type"])
        ok = not phases or error["phase"] in phases
    print("  as the rule says" if ok else "  NOT what the rule says")
    return 0 if ok else 1


def _within(name: str, actual: np.ndarray, t: dict, ref: dict) -> bool:
    """THE oracle rule of the harness that judged the finding, as embedded: every element has ``|actual -
    expected| <= max(atol + rtol*|expected|, the summation bound, rtol*max|expected| (normwise), floor)``, both
    finite; or equal; or both NaN."""
    e = ref[f"expected.{name}"].astype(np.float64)
    if actual.shape != e.shape:
        print(f"  {name}: shape {actual.shape}, expected {e.shape}")
        return False
    if not actual.size:
        return True
    a = actual.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        err = np.abs(a - e)
        allowed = t["atol"] + t["rtol"] * np.abs(e)
        if f"bound.{name}" in ref:
            allowed = np.maximum(allowed, ref[f"bound.{name}"])
        fin = np.abs(e[np.isfinite(e)])
        if t.get("normwise") and fin.size:
            allowed = np.maximum(allowed, t["rtol"] * float(fin.max()))
        if t.get("floor"):
            allowed = np.maximum(allowed, float(t["floor"]))
        ok = same | (np.isfinite(a) & np.isfinite(e) & (err <= allowed))
        if ok.all():
            return True
        ratio = np.where(ok, 0.0, np.where(np.isfinite(err) & (allowed > 0), err / np.where(allowed > 0, allowed, 1),
                                           np.inf))
    i = int(np.argmax(ratio))
    idx = tuple(int(n) for n in np.unravel_index(i, a.shape))
    print(f"  {name} ({actual.dtype}{actual.shape}): {int((~ok).sum())} of {a.size} elements beyond the tolerance; "
          f"worst at {idx}: actual {actual.reshape(-1)[i]!r}, expected {e.reshape(-1)[i]!r}, "
          f"|difference| {err.reshape(-1)[i]:.6g}, allowed {allowed.reshape(-1)[i]:.6g}")
    return False


def check_oracle() -> int:
    ref = unpack(EXPECTED)  # noqa: F821
    tol = CLAIM["tolerance"]  # noqa: F821
    print(f"claim: outputs beyond the tolerance from the expected values (a float64 reference computed from the "
          f"definitions); tensors judged: {', '.join(sorted(tol))}")
    outputs, error = run_side("case", CLAIM["device"], CLAIM["context"])  # noqa: F821
    if error is not None:
        print(f"  the call raised: {_error_text(error)}")
        return 1
    bad = 0
    for rule in sorted({t["describe"] for t in tol.values()}):
        print(f"  rule: |actual - expected| {rule}")
    for name, t in sorted(tol.items()):
        if name not in outputs:
            print(f"  {name}: not returned")
            bad += 1
            continue
        bad += not _within(name, outputs[name], t, ref)
    if not bad:
        print("  every judged tensor is within the tolerance")
    return int(bad > 0)


def check_bits() -> int:
    """Outputs bit for bit against embedded values (a declared order's reference, or a baseline's)."""
    ref = unpack(EXPECTED)  # noqa: F821
    print(f"claim: the outputs differ bit for bit from {CLAIM['reference']}")  # noqa: F821
    outputs, error = run_side("case", CLAIM["device"], CLAIM["context"])  # noqa: F821
    if error is not None:
        print(f"  the call raised: {_error_text(error)}")
        return 1
    found = 0
    for key in sorted(k for k in ref if k.startswith("bits.")):
        name = key.partition(".")[2]
        if name not in outputs:
            print(f"  {name}: not returned")
            found += 1
            continue
        d = first_difference(ref[key], outputs[name])
        if d is not None:
            print(f"  {name}: expected vs actual: {d}")
            found += 1
    return int(found > 0)


def check_relation() -> int:
    print(f"claim: not invariant under '{CLAIM['relation']}': {CLAIM['relation_text']}")  # noqa: F821
    device, context = CLAIM["device"], CLAIM["context"]  # noqa: F821
    base, error = run_side("case", device, context)
    if error is not None:
        print(f"  the base case raised: {_error_text(error)}")
        return 1
    found = 0
    for m in CLAIM["members"]:  # noqa: F821
        member, merr = run_side(m["case"], device, context)
        if merr is not None:
            print(f"  {m['label']}: raised {_error_text(merr)}")
            found += 1
            continue
        for label, b, a in pairs(CASES["case"]["family"], CLAIM["relation"], m["index"], base, member):  # noqa: F821
            if b is None or a is None:
                continue
            d = first_difference(np.ascontiguousarray(b), np.ascontiguousarray(a))
            if d is not None:
                print(f"  {m['label']}: {label} in the whole batch vs in the member: {d}")
                found += _claimed(label)  # (a tensor of another kind is printed, not counted)
    return int(found > 0)


def check_all() -> int:
    """What ``harness replay`` checks on one device and context, where the finding's kind was not given: each of
    ``CLAIM["checks"]`` (run to run, the oracle, a declared order; or the error or bad-input outcome)."""
    found = 0
    for name in CLAIM["checks"]:  # noqa: F821
        found += CHECKS[name]()
    return int(found > 0)


CHECKS = {"repeats": check_repeats, "processes": check_processes, "contexts": check_contexts,
          "devices": check_devices, "error": check_error, "bad_input": check_bad_input, "oracle": check_oracle,
          "bits": check_bits, "relation": check_relation, "all": check_all}


def versions() -> str:
    out = [f"Python {platform.python_version()} ({platform.platform()})", f"numpy {np.__version__}"]
    for name in ("chainer", "cupy", "espnet", "threadpoolctl"):
        try:
            out.append(f"{name} {importlib.metadata.version(name)}")
        except Exception:  # noqa: BLE001 - not installed: not needed unless the claim says so
            continue
    try:
        from threadpoolctl import threadpool_info
        out += [f"{i.get('internal_api')} {i.get('version')} ({i.get('num_threads')} threads)"
                for i in threadpool_info() if i.get("user_api") == "blas"]
    except ImportError:
        pass
    return "; ".join(out)


def main(argv: list) -> int:
    if len(argv) > 2 and argv[1] == "--child":
        return child_main(argv[2])
    try:
        for device in {CLAIM["device"], *CLAIM.get("devices", ())} - {"cpu"}:  # noqa: F821
            Env(types.SimpleNamespace(), device, CASES["case"], {})  # noqa: F821 - raises where no GPU is usable
    except CannotRun as exc:
        print(f"cannot check here: {exc}")  # one line, nothing else: exit 2
        return 2
    print(TITLE)  # noqa: F821
    try:
        import_chainer()
        print(f"versions: {versions()}")
        print(f"case {CASES['case'].get('id', '')} ({CASES['case']['family']}), call {CALL}"  # noqa: F821
              + (f"({', '.join(f'{k}={v!r}' for k, v in PARAMS.items())})" if PARAMS else "") +  # noqa: F821
              f", device {CLAIM['device']}, context {CLAIM['context']['name']}")  # noqa: F821
        # A finding seen in some runs only (the subject is not reproducible here) gets several tries.
        tries = int(CLAIM.get("tries") or 1)  # noqa: F821
        for i in range(tries):
            if tries > 1:
                print(f"try {i + 1} of {tries}")
            code = CHECKS[CLAIM["check"]]()  # noqa: F821
            if code:
                break
    except CannotRun as exc:
        print(f"cannot check here: {exc}")
        return 2
    print("REPRODUCED: the defect is present (exit 1)" if code else "NOT REPRODUCED: the defect is gone (exit 0)")
    return code
