"""`Context`: the execution settings a run happens under, as data with a stable name.

A context holds a BLAS thread count (set at run time with threadpoolctl), Chainer configuration
values (``chainer.using_config``), environment variables that only take effect in a fresh
process (the runner starts the worker with them), and whether the GPU is kept busy by another
process while the subject runs. New contexts need no code in the subjects: add one to
:data:`CONTEXTS` or pass ``--contexts`` a name from it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from harness.core.errors import UnknownContext

__all__ = ["Context", "CONTEXTS", "DEFAULT_CONTEXTS", "get_context", "context_order", "parse_contexts", "blas_info",
           "blas_controller"]


def _frozen_items(m: Mapping[str, Any] | tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    items = m.items() if isinstance(m, Mapping) else m
    return tuple(sorted((str(k), v) for k, v in items))


@dataclass(frozen=True)
class Context:
    """One execution context. ``devices`` limits it to device kinds where it means something."""

    name: str
    blas_threads: int | None = None
    chainer_config: tuple[tuple[str, Any], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    contention: bool = False
    devices: tuple[str, ...] = ("cpu", "gpu")
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "chainer_config", _frozen_items(self.chainer_config))
        object.__setattr__(self, "env", _frozen_items(self.env))

    def applies_to(self, device_kind: str) -> bool:
        return device_kind in self.devices

    @property
    def needs_fresh_process(self) -> bool:
        """Environment variables are read at start-up, so such a context has its own worker pool."""
        return bool(self.env)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "blas_threads": self.blas_threads,
                "chainer_config": dict(self.chainer_config), "env": dict(self.env),
                "contention": self.contention, "devices": list(self.devices),
                "description": self.description}

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Apply the run-time parts (BLAS threads, Chainer config) for the duration of a run."""
        with contextlib.ExitStack() as stack:
            if self.blas_threads is not None:
                stack.enter_context(blas_controller().limit(limits=self.blas_threads, user_api="blas"))
            if self.chainer_config:
                from harness.core.compat import import_chainer

                chainer = import_chainer()
                for key, value in self.chainer_config:
                    stack.enter_context(chainer.using_config(key, value))
            yield


_NCPU = os.cpu_count() or 1
_CONTROLLER: list[Any] = []


def blas_controller() -> Any:
    """This process's one ThreadpoolController: ``threadpool_limits()`` rescans the loaded libraries on every
    call, which a run would pay each time; ``blas_controller().limit(...)`` reuses this one scan."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0]

CONTEXTS: dict[str, Context] = {
    c.name: c
    for c in (
        Context("default", description="the machine's defaults"),
        # BLAS thread counts matter to host BLAS only: these contexts apply to the CPU.
        Context("blas1", blas_threads=1, devices=("cpu",), description="BLAS limited to 1 thread (threadpoolctl)"),
        Context(f"blas{max(_NCPU, 2)}", blas_threads=max(_NCPU, 2), devices=("cpu",),
                description=f"BLAS at {max(_NCPU, 2)} threads (threadpoolctl)"),
        Context("debug", chainer_config=(("debug", True),), description="chainer.config.debug = True"),
        Context("cudnn_deterministic", chainer_config=(("cudnn_deterministic", True),), devices=("gpu",),
                description="chainer.config.cudnn_deterministic = True"),
        Context("cublas_ws", env=(("CUBLAS_WORKSPACE_CONFIG", ":4096:8"),), devices=("gpu",),
                description="CUBLAS_WORKSPACE_CONFIG=:4096:8 (fresh process)"),
        Context("omp1", env=(("OMP_NUM_THREADS", "1"), ("OPENBLAS_NUM_THREADS", "1")), devices=("cpu",),
                description="OMP/OPENBLAS_NUM_THREADS=1 at start-up (fresh process)"),
        Context("hashseed", env=(("PYTHONHASHSEED", "12345"),),
                description="PYTHONHASHSEED=12345 (fresh process)"),
        Context("contention", contention=True, devices=("gpu",),
                description="another process keeps the same GPU busy"),
    )
}

#: The contexts a default campaign runs (each only on the devices it applies to).
DEFAULT_CONTEXTS: tuple[str, ...] = ("default", "blas1", f"blas{max(_NCPU, 2)}", "debug",
                                     "cudnn_deterministic", "cublas_ws", "contention")


def context_order(names: Iterable[str]) -> tuple[str, ...]:
    """Context names once each, in the registry's order (default, blas1, blas2, debug, ...), unknown ones last."""
    order = {n: i for i, n in enumerate(CONTEXTS)}
    return tuple(sorted({n for n in names if n}, key=lambda n: (order.get(n, len(order)), n)))


def get_context(name: str) -> Context:
    """The registered context ``name``; ``blasN`` for any N is made on demand."""
    if name in CONTEXTS:
        return CONTEXTS[name]
    if name.startswith("blas") and name[4:].isdigit() and int(name[4:]) >= 1:
        n = int(name[4:])
        return Context(name, blas_threads=n, devices=("cpu",), description=f"BLAS at {n} threads (threadpoolctl)")
    raise UnknownContext(f"context={name!r} is not one of {', '.join(CONTEXTS)} (or blasN)")


def parse_contexts(text: str | Sequence[str] | None) -> list[Context]:
    """A comma list of context names (or the names); None or 'defaults' gives :data:`DEFAULT_CONTEXTS`."""
    if text is not None and not isinstance(text, str):
        text = ",".join(text)
    if text is None or text.strip() in ("", "defaults"):
        return [get_context(n) for n in DEFAULT_CONTEXTS]
    return [get_context(n.strip()) for n in text.split(",") if n.strip()]


def blas_info() -> list[dict[str, Any]]:
    """The BLAS libraries loaded in this process, with version and thread count (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    keep = ("user_api", "internal_api", "version", "num_threads", "architecture", "threading_layer")
    return [{k: lib.get(k) for k in keep} for lib in threadpool_info() if lib.get("user_api") == "blas"]
