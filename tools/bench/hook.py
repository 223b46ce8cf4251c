"""Section ``hook``: the localize hook -- a subject run with ``HashStreamHook`` installed / without."""

from __future__ import annotations

import time
from typing import Any

from tools.bench.common import Row, log, median, ratio

__all__ = ["bench_hook"]

def bench_hook(level: str = "full", rounds: int | None = None, quiet: bool = False) -> tuple[list[Row], dict[str, Any]]:
    """Wall time of one subject run with the localize hook installed / without it.

    Off, the hook costs nothing: it is a context manager, and no code path consults it when it
    is not installed. On, it hashes every node's inputs, outputs and gradients.
    """
    from harness.core.cases import Case
    from harness.core.contexts import get_context
    from harness.core.devices import CPU
    from harness.execute.hooks import HashStreamHook
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject

    quick = level != "full"
    rounds = rounds or (1 if level == "smoke" else 3 if quick else 7)
    cases = {
        "chainer.NStepLSTM": Case("lstm", 3, {"n_layers": 1, "in_size": 16 if quick else 64,
                                              "hidden": 16 if quick else 64, "lengths": [8 if quick else 20] * 8}),
        "chainer.embed_id": Case("embed", 1, {"vocab": 100, "width": 16, "ids_shape": [64, 32]}),
    }
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    for name, case in cases.items():
        subj, ctx = get_subject(name), get_context("default")
        execute(subj, case, CPU, ctx)  # warm-up
        off: list[float] = []
        on: list[float] = []
        for r in range(rounds):
            for with_hook in ((False, True) if r % 2 == 0 else (True, False)):
                t0 = time.perf_counter()
                if with_hook:
                    with HashStreamHook():
                        execute(subj, case, CPU, ctx)
                else:
                    execute(subj, case, CPU, ctx)
                (on if with_hook else off).append(time.perf_counter() - t0)
        on_off = median(ratio(a, b) for a, b in zip(on, off))
        rows.append(Row("hook", f"{name}: run with hook / without", on_off, "seconds with hook / without",
                         "seconds with HashStreamHook", median(on), "seconds without", median(off), "s", rounds,
                         note=f"case {case.id}; CPU, context default"))
        raw[name] = {"on": on, "off": off}
        log(f"hook {name} done", quiet)
    return rows, raw
