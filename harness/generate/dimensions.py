"""The sizes of a case, one dimension at a time, and the boundaries each dimension crosses: edge kinds.

Each family's dimensions (embed: ``ids`` in one batch, ``vocab``, ``width``, ``pileup`` on one row; lstm:
``steps``, ``hidden``, ``layers``, ``batch``, ``in_size``; pipeline: all of both but ``in_size``) are read from a
case by :func:`dimension_value`; :data:`BOUNDARIES` holds the sizes where what runs changes (a kernel's blocking,
a reduction's depth, a float's exact count), and :func:`dimension_kinds` names each one a case crosses
(``lstm.steps>=512``), so that :func:`harness.generate.edges.edge_kinds` tags it like any other edge, a contract
can name it and the builders draw on both sides of it (:func:`boundaries`). How large each dimension gets in a
real model is the recipes' table (:data:`harness.generate.recipes.DIMENSIONS`). What a dimension's corner case
or a real-scale case runs in a campaign (fewer runs, and only the contexts that can change its bits) is
:func:`size_case_runs`. Pure: NumPy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.core.cases import Case
from harness.core.contexts import Context, get_context

__all__ = ["BOUNDARIES", "boundaries", "boundary_label", "dimension_kind", "dimension_kinds", "dimension_value",
           "row_pileup", "SIZE_CASE_TAGS", "SIZE_CASE_RUNS", "size_case_runs", "size_case_runs_text"]

_STEPS, _UNITS = (64, 256, 512), (512, 1024)
_IDS, _VOCAB = (1 << 13, 1 << 14, 1 << 16), (1 << 15, 1 << 16)
_BATCH, _PILE = (16, 256, 1024), (1000, 65_505)
#: Per family and dimension, in the order the tables list them: the sizes where what runs changes (sequence
#: steps; units of a hidden layer or an embedding's width; ids in one batch; vocabulary rows; sequences in one
#: batch; ids on one row: 1,000 atomic adds to one address, float16's largest count).
BOUNDARIES: dict[tuple[str, str], tuple[int, ...]] = {
    ("embed", "ids"): _IDS, ("embed", "vocab"): _VOCAB, ("embed", "width"): _UNITS, ("embed", "pileup"): _PILE,
    ("lstm", "steps"): _STEPS, ("lstm", "hidden"): _UNITS, ("lstm", "layers"): (2, 4), ("lstm", "batch"): _BATCH,
    ("lstm", "in_size"): (128, 256),
    ("pipeline", "ids"): _IDS, ("pipeline", "pileup"): _PILE, ("pipeline", "steps"): _STEPS,
    ("pipeline", "hidden"): _UNITS, ("pipeline", "layers"): (2,), ("pipeline", "batch"): _BATCH,
    ("pipeline", "vocab"): _VOCAB, ("pipeline", "width"): _UNITS,
}


def boundaries(family: str, name: str) -> tuple[int, ...]:
    """The boundaries of one dimension (none for a name the family lacks): the values a builder's draws reach
    on both sides (:meth:`harness.generate.choices.Source.sized`)."""
    return BOUNDARIES.get((family, name), ())


def boundary_label(n: int) -> str:
    """A boundary as the edge kinds write it: powers of two from 2^13 as ``2^k``, others as digits."""
    return f"2^{n.bit_length() - 1}" if n >= 1 << 13 and n & (n - 1) == 0 else str(n)


def dimension_kind(family: str, name: str, boundary: int) -> str:
    """The edge kind of crossing ``boundary`` (``lstm.steps>=512``)."""
    return f"{family}.{name}>={boundary_label(boundary)}"


def dimension_value(case: Case, name: str, ids: Any = None) -> int:
    """The value of dimension ``name`` of ``case`` (0 where its family has no such dimension); ``ids``: the
    case's built ids, where they were built (a pile-up is then counted exactly, else bounded from the spec)."""
    s = case.spec
    if name == "pileup" and case.family != "lstm":
        return row_pileup(case, ids)
    if case.family == "embed":
        n = 1
        for d in s["ids_shape"]:
            n *= int(d)
        values = {"ids": n, "vocab": int(s["vocab"]), "width": int(s["width"])}
    else:
        lengths = [int(n) for n in s["lengths"]]
        values = {"steps": max(lengths, default=0), "hidden": int(s["hidden"]), "layers": int(s["n_layers"]),
                  "batch": len(lengths)}
        if case.family == "lstm":
            values["in_size"] = int(s["in_size"])
        else:
            values.update(vocab=int(s["vocab"]), width=int(s["width"]), ids=len(lengths) * values["steps"])
    return values.get(name, 0)


def dimension_kinds(case: Case, ids: Any = None) -> set[str]:
    """The boundaries of :data:`BOUNDARIES` that ``case`` crosses, as edge kinds."""
    out: set[str] = set()
    for (family, name), bounds in BOUNDARIES.items():
        if family == case.family:
            value = dimension_value(case, name, ids)
            out.update(dimension_kind(family, name, b) for b in bounds if value >= b)
    return out


def row_pileup(case: Case, ids: np.ndarray | None = None) -> int:
    """The most ids that one row of the embedding receives (ignored ids add nothing): exact from the built
    ids, else a lower bound from the spec (the pigeonhole over the rows the ids are drawn from, and the padding,
    which all lands on one row)."""
    s = case.spec
    il = s.get("ignore_label")
    if ids is not None:
        kept = ids[ids != il] if isinstance(il, int) else ids
        return int(np.unique(kept, return_counts=True)[1].max()) if kept.size else 0
    vocab = int(s["vocab"])
    if case.family == "embed":
        shape = [int(n) for n in s["ids_shape"]]
        n = int(np.prod(shape)) if shape else 1
        rows = [int(v) for v in s.get("row_lengths", ())][:shape[0]] if len(shape) == 2 else []
        padded = sum(shape[1] - min(r, shape[1]) for r in rows)
    else:
        lengths = [int(v) for v in s["lengths"]]
        n, padded = len(lengths) * max(lengths), sum(max(lengths) - v for v in lengths)
    pad = s.get("pad_id", il)
    on_pad = padded if pad is not None and pad != il else 0
    drawn = n - padded
    if isinstance(il, int) and "row_lengths" not in s and case.family == "embed":
        drawn = int(drawn * (1.0 - float(s.get("ignore_frac", 0.0))))
    kind = s.get("id_kind", "uniform")
    spread = 1 if kind == "all_equal" else min(vocab, int(s.get("distinct", 2))) if kind == "collision" else vocab
    return max(on_pad, -(-drawn // max(spread, 1)))


#: The tags of the cases that are there for their sizes: a dimension's corner
#: (:func:`harness.generate.recipes.corner_cases`) and a real model's shapes
#: (:func:`harness.generate.corpora.real_scale_cases`).
SIZE_CASE_TAGS = ("corner", "real-scale")
#: The runs of a size case on the CPU: 2 in one worker and 1 in a fresh one, the fewest that tell run-to-run
#: and process-to-process differences apart. A size case is there for its size; the corpus's other cases take
#: the campaign's full repeats at every size below it.
SIZE_CASE_RUNS = (2, 1)


def size_case_runs(case: Case, context: Context | str, device: str, repeats: int, fresh: int
                   ) -> tuple[int, int, str | None]:
    """``(repeats, fresh, left out)`` of ``case`` in ``context`` on a ``device`` kind, given the campaign's
    ``repeats`` and ``fresh``: those, for every case but a size case (:data:`SIZE_CASE_TAGS`) on the CPU. A size
    case runs :data:`SIZE_CASE_RUNS` there, and is left out (the third item says why: the task's skip reason, in
    the report) of a context that changes only BLAS's thread count where no matrix product of the case is large
    enough for OpenBLAS to split (:func:`harness.core.cost.threaded_product`): such a context cannot change its
    bits."""
    if not set(SIZE_CASE_TAGS) & set(case.tags) or device != "cpu":
        return repeats, fresh, None
    from harness.core.cost import SERIAL_GEMM_MNK, SERIAL_GEMV_ELEMENTS, threaded_product

    ctx = get_context(context) if isinstance(context, str) else context
    blas_only = ctx.blas_threads is not None and not (ctx.chainer_config or ctx.env or ctx.contention)
    runs = min(repeats, SIZE_CASE_RUNS[0]), min(fresh, SIZE_CASE_RUNS[1])
    if blas_only and threaded_product(case) is None:
        return (*runs, f"not asked of a size case: {ctx.name} changes only BLAS's thread count, and "
                      f"no matrix product of the case is large enough for OpenBLAS to split (GEMMs up to "
                      f"{SERIAL_GEMM_MNK:,} multiply-adds, matrix-vector products under {SERIAL_GEMV_ELEMENTS:,} "
                      f"elements run on one thread)")
    return (*runs, None)


def size_case_runs_text(case: Case, contexts: list[str]) -> str:
    """What :func:`size_case_runs` makes of ``case`` on the CPU across ``contexts``, in words (``cases
    --coverage``): the contexts it runs in and how often, and those it is left out of."""
    runs = {c: size_case_runs(case, c, "cpu", *SIZE_CASE_RUNS) for c in contexts}
    kept = [c for c, (_, _, why) in runs.items() if why is None]
    left = [c for c, (_, _, why) in runs.items() if why is not None]
    text = f"{', '.join(kept) or 'no context'}: {SIZE_CASE_RUNS[0]} + {SIZE_CASE_RUNS[1]} fresh runs"
    return text + (f"; not {', '.join(left)} (no product BLAS splits)" if left else "")
