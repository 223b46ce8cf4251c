"""What a corpus reaches at real sizes, and what the rest would need: ``harness cases --coverage``.

:func:`coverage_text` prints four tables for a corpus: the edge kinds (:func:`harness.generate.edges.coverage_rows`),
the size boundaries (:func:`harness.generate.edges.size_coverage_rows`: reached, or what their smallest case
needs against each device's memory), the recipe dimensions (:func:`dimension_rows`: per family and
dimension, the largest value reached against the recipes' maximum, the boundaries crossed, and why a dimension
stays below it) and the named configurations of :data:`harness.generate.recipes.RECIPES`
(how many cases were drawn around each, the largest, and what the configuration's full size needs). Memory
figures are the cost model's estimates of one run's peak (:func:`peak_bytes`); the devices are this machine's
RAM for ``cpu`` and each GPU ``nvidia-smi`` lists. Pure: no Chainer, no CuPy.
"""

from __future__ import annotations

from typing import Any, Iterable

from harness.core.cases import Case
from harness.core.contexts import DEFAULT_CONTEXTS, get_context
from harness.core.cost import device_memory, estimate, machine_memory
from harness.core.cost import gib as _gib
from harness.generate.dimensions import boundary_label, dimension_value, size_case_runs_text
from harness.generate.edges import SIZE_EDGES, built_ids, coverage_rows, size_coverage_rows, small_ids
from harness.generate.recipes import DIMENSIONS, RECIPES, corner_cases, full_case, recipe_of

__all__ = ["device_memories", "peak_bytes", "recipe_rows", "dimension_rows", "coverage_text"]


def device_memories() -> dict[str, int]:
    """The memory of each device a case could run on here: ``cpu`` (this machine's RAM) and each ``gpu:N``
    ``nvidia-smi`` lists (:func:`harness.core.cost.machine_memory`, :func:`harness.core.cost.device_memory`)."""
    out = {"cpu": machine_memory()}
    try:
        from harness.core.nvsmi import query_gpus

        for gpu in query_gpus().get("gpus") or ():
            memory = device_memory(f"gpu:{gpu['index']}")
            if memory:
                out[f"gpu:{gpu['index']}"] = memory
    except Exception:  # noqa: BLE001 - no nvidia-smi, or it failed: the CPU alone
        pass
    return out


def peak_bytes(case: Case, device: str) -> int:
    """The estimated peak bytes of one run of ``case`` on ``device`` by its costliest subject there
    (:func:`harness.core.cost.estimate`: ESPnet's one-hot matrix counts on a GPU)."""
    return int(estimate(case, device="cpu" if device == "cpu" else "gpu").peak)


def _shape(case: Case) -> str:
    s = case.spec
    if case.family == "lstm":
        return (f"{'bi' if s.get('bidirectional') else 'uni'} {s['n_layers']}x{s['hidden']}, in {s['in_size']}, "
                f"{len(s['lengths'])} seqs <= {max(s['lengths'])} steps")
    ids = "x".join(str(n) for n in (s["ids_shape"] if case.family == "embed" else
                                    [len(s["lengths"]), max(s["lengths"])]))
    pad = f"pad {s['pad_id']}" if "pad_id" in s else f"ignore {s.get('ignore_label')}"
    rnn = f", {s['n_layers']}x{s['hidden']}" if case.family == "pipeline" else ""
    return f"vocab {s['vocab']:,} x {s['width']}{rnn}, ids {ids}, {pad}"


def _size(case: Case) -> int:
    s = case.spec
    if case.family == "embed":
        return int(s["vocab"]) * int(s["width"]) + int(s["width"]) * int(_prod(s["ids_shape"]))
    return max(int(n) for n in s["lengths"]) * int(s["hidden"]) * int(s.get("in_size", s.get("width", 1)))


def _prod(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def recipe_rows(cases: Iterable[Case], memory: dict[str, int]) -> list[dict[str, Any]]:
    """Per configuration and family: the cases drawn around it, the largest of them, and what the
    configuration's full size (:func:`harness.generate.recipes.full_case`) needs against each device's memory."""
    drawn: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        name = recipe_of(c)
        if name is not None:
            drawn.setdefault((name, c.family), []).append(c)
    rows = []
    for r in RECIPES:
        for family in r.families:
            mine = drawn.get((r.name, family), [])
            row: dict[str, Any] = {"configuration": r.name, "family": family, "cases": len(mine),
                                   "largest drawn": _shape(max(mine, key=_size)) if mine else "-"}
            full = full_case(r, family)
            for device, have in memory.items():
                need = peak_bytes(full, device)
                row[f"full size on {device}"] = (f"needs {_gib(need)} (has {_gib(have)})" if need > have
                                                 else f"fits ({_gib(need)} of {_gib(have)})")
            rows.append(row)
    return rows


def dimension_rows(cases: Iterable[Case], memory: dict[str, int]) -> list[dict[str, Any]]:
    """Per family and dimension of :data:`harness.generate.recipes.DIMENSIONS`: the largest value a case of the
    corpus reaches against the recipes' maximum, the boundaries that value crosses, and where it stays below the
    maximum, why: what the dimension's corner case (:func:`harness.generate.recipes.corner_cases`) needs at its
    peak against each device's memory, or that it fits and was left out of this corpus; and the CPU contexts and
    runs a default campaign gives that corner (:func:`harness.generate.dimensions.size_case_runs`)."""
    cases = list(cases)
    ids = {c.id: built_ids(c)[1] for c in cases if c.family != "lstm" and small_ids(c)}
    corners = {t.split(":", 1)[1]: c for c in corner_cases() for t in c.tags if t.startswith("corner:")}
    cpu = [n for n in DEFAULT_CONTEXTS if get_context(n).applies_to("cpu")]
    rows = []
    for d in DIMENSIONS:
        mine = [c for c in cases if c.family == d.family]
        largest = max((dimension_value(c, d.name, ids.get(c.id)) for c in mine), default=0)
        crossed = [boundary_label(b) for b in d.boundaries if largest >= b]
        if largest >= d.maximum:
            why = "reached"
        else:
            corner = corners[f"{d.family}.{d.name}"]
            needs = {device: peak_bytes(corner, device) for device in memory}
            short = [f"{device} needs {_gib(n)} (has {_gib(memory[device])})" for device, n in needs.items()
                     if n > memory[device]]
            fits = ", ".join(f"{dev} {_gib(n)}" for dev, n in needs.items())
            why = "; ".join(short) if short else f"left out of this corpus: its corner case fits ({fits})"
        rows.append({"family": d.family, "dimension": d.name, "largest": f"{largest:,}",
                     "recipe maximum": f"{d.maximum:,}", "boundaries crossed": ", ".join(crossed) or "-",
                     "not crossed": ", ".join(boundary_label(b) for b in d.boundaries if largest < b) or "-",
                     "status": why, "corner runs (cpu)": size_case_runs_text(corners[f"{d.family}.{d.name}"], cpu)})
    return rows


def coverage_text(cases: list[Case], memory: dict[str, int] | None = None) -> str:
    """The four coverage tables of ``cases`` as Markdown, each followed by a line that sums it up."""
    import pandas as pd

    memory = device_memories() if memory is None else memory
    out = []
    rows = coverage_rows(cases)
    missing = [str(r["edge"]) for r in rows if not r["cases"]]
    out += [pd.DataFrame(rows).to_markdown(index=False),
            f"\n{len(rows) - len(missing)} of {len(rows)} edge kinds reached by {len(cases)} cases"
            + (f"; not reached: {', '.join(missing)}" if missing else "")]
    sizes = size_coverage_rows(cases, memory, peak_bytes)
    reached = [r["boundary"] for r in sizes if r["cases"]]
    out += ["", pd.DataFrame(sizes).to_markdown(index=False),
            f"\n{len(reached)} of {len(SIZE_EDGES)} size boundaries reached; the others say what their smallest "
            f"case needs at its peak (memory: {', '.join(f'{d} {_gib(m)}' for d, m in memory.items())})"]
    dims = dimension_rows(cases, memory)
    short = [f"{r['family']}.{r['dimension']}" for r in dims if r["status"] != "reached"]
    out += ["", pd.DataFrame(dims).to_markdown(index=False),
            f"\n{len(dims) - len(short)} of {len(dims)} recipe dimensions reached at their maximum"
            + (f"; below it: {', '.join(short)}" if short else "")]
    configs = recipe_rows(cases, memory)
    hit = sorted({r["configuration"] for r in configs if r["cases"]})
    out += ["", pd.DataFrame(configs).to_markdown(index=False),
            f"\n{len(hit)} of {len(RECIPES)} configurations reached"
            + (f": {', '.join(hit)}" if hit else "")]
    return "\n".join(out)
