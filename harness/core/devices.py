"""`Device`: where a run happens (``cpu`` with NumPy, ``gpu:N`` with CuPy), as a small config object.

A device knows its array module, how to move host arrays to itself and back, and whether it is
available here, with a short reason when it is not. CuPy is imported lazily and only for GPU
devices, so everything works on machines without CUDA.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from harness.core.errors import InvalidArgument

if TYPE_CHECKING:  # NumPy is imported where arrays move: parsing ``--devices`` on the command line needs none
    import numpy as np

__all__ = ["Device", "CPU", "parse_device", "parse_devices", "available_gpus", "cupy_status", "DeviceSelection",
           "select_devices", "resolve_device", "gpu_presence", "gpu_reason", "gpu_problem"]


_NO_CUPY = "CuPy is not installed (pip install '.[gpu]')"


@functools.lru_cache(maxsize=None)
def cupy_status() -> tuple[Any, str]:
    """``(cupy module or None, reason)``; the reason says in one line why there is no usable GPU."""
    try:
        import cupy
    except ImportError:
        return None, _NO_CUPY
    except Exception as exc:  # noqa: BLE001 - a broken CuPy install is one line, not a traceback
        return None, f"CuPy failed to import: {type(exc).__name__}: {exc}"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError, driver missing, ...
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"CuPy {cupy.__version__} cannot see a CUDA driver: {msg}"
    if n == 0:
        return None, f"CuPy {cupy.__version__} sees no CUDA device"
    return cupy, f"{n} CUDA device(s)"


#: Environment variables that turn GPU checks off: ``HARNESS_GPU=0`` (what ``make GPU=0`` exports) and the
#: older ``HARNESS_ALLOW_UNUSABLE_GPU=1``, read here and nowhere else.
_DISABLED_REASON = "GPU checks disabled (HARNESS_GPU=0 / make GPU=0)"


def _gpu_disabled() -> bool:
    return (os.environ.get("HARNESS_GPU", "").strip() == "0"
            or os.environ.get("HARNESS_ALLOW_UNUSABLE_GPU", "").strip() == "1")


def gpu_presence() -> tuple[str, str]:
    """``(state, reason)``: ``absent`` (no nvidia-smi, or it lists no GPU), ``usable`` (CuPy runs on the
    GPUs nvidia-smi sees), ``unusable`` (nvidia-smi sees a GPU, or is there and fails, but CuPy cannot
    use one) or ``disabled`` (``HARNESS_GPU=0``, what ``make GPU=0`` sets).

    ``unusable`` is the state a GPU runner must fail on: without it, every GPU check would skip and the
    run would pass on a machine it never tested. :func:`gpu_problem` says so in one line; :func:`gpu_reason`
    says why a GPU cannot run here.
    """
    from harness.core.nvsmi import query_gpus

    if _gpu_disabled():
        return "disabled", _DISABLED_REASON
    smi = query_gpus()
    cp, reason = cupy_status()
    if not smi["found"]:
        if cp is not None:  # a driver without the tool (some containers): CuPy's word is enough
            return "usable", reason
        return "absent", "no GPU: nvidia-smi not found"
    if smi["ok"] and not smi["gpus"]:
        return "absent", "no GPU: nvidia-smi sees no GPU"
    if cp is None:
        return "unusable", f"{smi['reason']}, but {reason}"
    return "usable", f"{smi['reason']}; CuPy {cp.__version__}: {reason}"


def gpu_reason() -> str | None:
    """Why no GPU can run here, in one line (None where CuPy can use one): the one text every skip, refusal and
    header gives. Where there is no NVIDIA GPU at all it says so (``no GPU: nvidia-smi not found``), not what
    CuPy lacks; where nvidia-smi sees a GPU that CuPy cannot use, ``GPU present but unusable: ...``."""
    if _gpu_disabled():
        return _DISABLED_REASON
    if cupy_status()[0] is not None:
        return None  # usable: no nvidia-smi call needed (every worker process asks)
    state, reason = gpu_presence()
    if state == "absent":  # CuPy's state is worth saying only where CuPy is there (and broken)
        cupy_reason = cupy_status()[1]
        return reason if cupy_reason == _NO_CUPY else f"{reason} ({cupy_reason})"
    return reason if state == "disabled" else f"GPU present but unusable: {reason}"


def gpu_problem() -> str | None:
    """The one GPU-presence rule of ``harness env --check``, ``make venv`` and the pytest plugin: a line when
    nvidia-smi sees a GPU that CuPy cannot use and GPU checks are not disabled, else None."""
    state, reason = gpu_presence()
    if state != "unusable":
        return None
    return f"GPU present but unusable: {reason} (make GPU=0, i.e. HARNESS_GPU=0, runs without the GPU)"


def available_gpus() -> int:
    """Number of CUDA devices CuPy can use here (0 where there is none, or GPU checks are disabled)."""
    cp, _ = cupy_status()
    return 0 if cp is None or gpu_reason() is not None else int(cp.cuda.runtime.getDeviceCount())


@dataclass(frozen=True)
class Device:
    """A device a subject runs on. ``id`` is the test suffix: ``cpu`` or ``gpu:0``."""

    kind: str
    index: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("cpu", "gpu"):
            raise InvalidArgument(f"device kind={self.kind!r} is not 'cpu' or 'gpu'")
        if self.kind == "gpu" and (self.index is None or self.index < 0):
            raise InvalidArgument(f"gpu device index={self.index!r} must be a non-negative int")
        if self.kind == "cpu" and self.index is not None:
            raise InvalidArgument(f"cpu device index={self.index!r} must be None")

    @property
    def id(self) -> str:
        return "cpu" if self.kind == "cpu" else f"gpu:{self.index}"

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"

    def __repr__(self) -> str:
        return f"Device({self.id})"

    def __str__(self) -> str:
        return self.id

    def availability(self) -> tuple[bool, str]:
        """``(available, reason)``: the reason is a short skip message where unavailable."""
        if self.kind == "cpu":
            return True, "NumPy"
        why = gpu_reason()
        if why is not None:
            return False, why
        cp, reason = cupy_status()
        n = cp.cuda.runtime.getDeviceCount()
        if self.index >= n:
            return False, f"no GPU {self.index}: only {n} CUDA device(s)"
        return True, reason

    @property
    def available(self) -> bool:
        return self.availability()[0]

    @property
    def xp(self) -> Any:
        """The array module: numpy or cupy."""
        if self.kind == "cpu":
            import numpy

            return numpy
        cp, _ = cupy_status()
        why = gpu_reason()
        if cp is None or why is not None:
            raise InvalidArgument(f"device={self.id!r} is unavailable: {why}")
        return cp

    def chainer_device(self) -> Any:
        """The matching ``chainer.backend.Device`` (Chainer imported through harness.core.compat)."""
        from harness.core.compat import import_chainer

        chainer = import_chainer()
        return chainer.get_device("@numpy" if self.kind == "cpu" else f"@cupy:{self.index}")

    def put(self, a: np.ndarray) -> Any:
        """Copy a host array to this device, bit for bit."""
        if self.kind == "cpu":
            import numpy

            return numpy.array(a, copy=True)
        cp = self.xp
        with cp.cuda.Device(self.index):
            return cp.asarray(a)

    def to_host(self, a: Any) -> np.ndarray:
        """Copy an array on this device back to host NumPy (after the run)."""
        import numpy

        if a is None:
            return None  # type: ignore[return-value]
        if isinstance(a, numpy.ndarray):
            return a
        get = getattr(a, "get", None)
        return numpy.asarray(get() if get is not None else a)

    def synchronize(self) -> None:
        """Wait for queued device work (no-op on CPU)."""
        if self.kind == "gpu":
            with self.xp.cuda.Device(self.index):
                self.xp.cuda.get_current_stream().synchronize()

    def seed(self, seed: int) -> None:
        """Seed the device's global generator, for code (like Chainer's dropout) that draws from it."""
        import numpy

        numpy.random.seed(seed % 2**32)
        if self.kind == "gpu":
            with self.xp.cuda.Device(self.index):
                self.xp.random.seed(seed % 2**32)


CPU = Device("cpu")


def parse_device(text: str) -> Device:
    """``cpu``, ``gpu`` (= gpu:0) or ``gpu:N``; anything else is a one-line InvalidArgument."""
    t = text.strip().lower()
    if t == "cpu":
        return CPU
    if t in ("gpu", "cuda"):
        return Device("gpu", 0)
    if t.startswith(("gpu:", "cuda:", "@cupy:")):
        tail = t.split(":", 1)[1]
        if tail.isdigit():
            return Device("gpu", int(tail))
    raise InvalidArgument(f"device={text!r} is not 'cpu', 'gpu' or 'gpu:N'")


def parse_devices(text: str | Sequence[str] | None) -> list[Device]:
    """A comma list (or the names); ``all`` = cpu and every visible GPU; ``gpu`` alone = every visible GPU (at
    least gpu:0)."""
    if text is not None and not isinstance(text, str):
        text = ",".join(text)
    if text is None or text.strip() == "" or text.strip() == "default":
        text = "all"
    out: list[Device] = []
    for part in text.split(","):
        p = part.strip().lower()
        if p == "all":
            out.append(CPU)
            out.extend(Device("gpu", i) for i in range(max(available_gpus(), 1)))
        elif p == "gpu":
            out.extend(Device("gpu", i) for i in range(max(available_gpus(), 1)))
        else:
            out.append(parse_device(p))
    seen: dict[str, Device] = {}
    for d in out:
        seen.setdefault(d.id, d)
    return list(seen.values())


@dataclass(frozen=True)
class DeviceSelection:
    """What a ``--devices`` value asks for, here.

    ``usable``: the devices that will really run. ``skipped``: devices the value only implied
    (``all`` on a machine without a GPU), each with the reason it cannot run; they are kept so
    that plans and reports show them as skipped rows, never drop them silently.
    """

    text: str
    usable: tuple[Device, ...]
    skipped: tuple[tuple[Device, str], ...] = ()

    @property
    def planned(self) -> list[Device]:
        """Usable and skipped devices, in the order asked: what a campaign plans (skipped ones end as
        ``skipped`` rows with the reason)."""
        order = {d.id: i for i, d in enumerate(_expand(self.text))}
        both = [*self.usable, *(d for d, _ in self.skipped)]
        return sorted(both, key=lambda d: order.get(d.id, len(order)))

    @property
    def notes(self) -> list[str]:
        """One line per skipped device, for the terminal."""
        return [f"devices={self.text!r}: skipping {d.id}: {reason}" for d, reason in self.skipped]


def _expand(text: str) -> list[Device]:
    out: list[Device] = []
    for part in text.split(","):
        p = part.strip().lower()
        if p in ("all", "default"):
            out.append(CPU)
            out.extend(Device("gpu", i) for i in range(max(available_gpus(), 1)))
        elif p in ("gpu", "cuda"):
            out.extend(Device("gpu", i) for i in range(max(available_gpus(), 1)))
        else:
            out.append(parse_device(p))
    return list({d.id: d for d in out}.values())


def select_devices(text: str | Sequence[str] | None) -> DeviceSelection:
    """The one rule for ``--devices`` (report, gate, audit, localize, the pytest plug-in):

    - ``all`` (the default, also None) means "what is here": CPU and every usable GPU; a GPU that
      is not usable is *skipped* with its reason (see :attr:`DeviceSelection.notes`).
    - a device asked for by name (``gpu``, ``gpu:N``, ``cpu``) must be usable: otherwise
      :class:`InvalidArgument` with the reason (``devices='gpu': no GPU: nvidia-smi not found``).
    - ``''`` or an unknown name is :class:`InvalidArgument`.

    ``text``: the names (an options record's, parsed once from ``--devices``) or a comma list of them.
    """
    if text is None:
        text = "all"
    elif not isinstance(text, str):
        text = ",".join(text)
    parts = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not parts:
        raise InvalidArgument(f"devices={text!r} names no device: give cpu, gpu, gpu:N or all")
    named = [p for p in parts if p not in ("all", "default")]
    for p in named:
        if p in ("gpu", "cuda"):
            if available_gpus() == 0:
                raise InvalidArgument(f"devices={text!r}: {gpu_reason() or 'CuPy sees no CUDA device'}")
        else:
            d = parse_device(p)
            ok, reason = d.availability()
            if not ok:
                raise InvalidArgument(f"devices={text!r}: {d.id} is not usable: {reason}")
    usable, skipped = [], []
    for d in _expand(text):
        ok, reason = d.availability()
        if ok:
            usable.append(d)
        else:
            skipped.append((d, reason))
    return DeviceSelection(text, tuple(usable), tuple(skipped))


def resolve_device(text: str, name: str = "device") -> Device:
    """One device asked for by name (``replay --device``, ``localize --device``): it must be usable here."""
    d = parse_device(text)
    ok, reason = d.availability()
    if not ok:
        raise InvalidArgument(f"{name}={text!r}: {d.id} is not usable: {reason}")
    return d
