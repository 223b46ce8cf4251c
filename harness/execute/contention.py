"""Keep GPUs busy from another process while subjects run: some atomics only race under load."""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any, Sequence

from harness.core.devices import Device

__all__ = ["Contention", "busy_loop"]

_CTX = mp.get_context("spawn")


def busy_loop(index: int, stop: Any, ready: Any, size: int = 4096, parent: int | None = None) -> None:
    """Run float32 GEMMs and scatter-adds on GPU ``index`` until ``stop`` is set (runs in the child, which dies
    with ``parent``)."""
    from harness.core.lifeline import die_with_parent

    die_with_parent(parent)
    import cupy as cp

    with cp.cuda.Device(index):
        a = cp.random.standard_normal((size, size), dtype=cp.float32)
        idx = cp.random.randint(0, 64, size=size * 64)
        acc = cp.zeros((64,), dtype=cp.float32)
        ready.set()
        while not stop.is_set():
            for _ in range(8):
                a = a @ a
                a /= cp.abs(a).max() + 1
                cp.add.at(acc, idx, 1.0)  # atomics on the same device as the subject's
            cp.cuda.get_current_stream().synchronize()


class Contention:
    """One busy process per GPU; ``start()`` waits until each has its load running."""

    def __init__(self, devices: Sequence[Device]) -> None:
        self.devices = [d for d in devices if d.is_gpu]
        self.stop_event = _CTX.Event()
        self.procs: list[Any] = []

    def start(self) -> "Contention":
        for d in self.devices:
            ready = _CTX.Event()
            p = _CTX.Process(target=busy_loop, args=(d.index, self.stop_event, ready, 4096, os.getpid()),
                             daemon=True)
            p.start()
            ready.wait(120)
            self.procs.append(p)
        return self

    def stop(self) -> None:
        self.stop_event.set()
        for p in self.procs:
            p.join(30)
            if p.is_alive():
                p.kill()
        self.procs.clear()
