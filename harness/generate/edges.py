"""The edges where real defects live, as named kinds: which ones a corpus covers, and one case for each.

:func:`edge_kinds` says which edge kinds a case reaches, from its spec and (for an embedding) its ids; it is
the one definition, so ``python -m harness cases --coverage`` can read any corpus. :func:`edge_cases` builds a
small case for every kind, which :func:`harness.generate.corpora.default_corpus` puts before its random cases,
so every default campaign reaches every edge (V is the vocabulary, D the embedding width):

- embeddings: an ignore label at -1, 0, V-1, V, strictly between V and D (where D > V + 1), at or above
  max(V, D), and large negative, each with the label present among the ids and absent; a negative label
  that, read as an index, names a row the ids use (-V <= label < 0 with id V + label present); a label that
  names no row (label >= V or label < -V); id V-1 present;
  V = 1; D = 1; a batch of one; an empty batch; every signed integer id dtype; float16 upstream gradients whose
  running sum crosses 65,504 while the total does not;
- LSTMs and pipelines: a batch of one; length-1 sequences; tied lengths; unsorted lengths whose sorting
  permutation has a cycle of length 3 or more; initial states given and absent; each kind of partial
  upstream gradient (``grad_outputs``); float16 inputs.

Pure: no Chainer, no CuPy (a corpus can be checked on a machine without them).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from harness.core.case_limits import estimate_case_bytes
from harness.core.cases import GRAD_OUTPUTS, ID_DTYPES, Case, ContentMemo, build_arrays, encode_array
from harness.generate.dimensions import dimension_kinds, row_pileup

__all__ = ["EMBED_EDGES", "RNN_EDGES", "EDGE_KINDS", "edge_kinds", "edge_cases", "coverage_rows",
           "with_edge_tags", "SIZE_EDGES", "CHEAP_SIZE_EDGES", "size_edge_kinds", "size_edge_cases",
           "size_coverage_rows", "row_pileup", "built_ids", "small_ids"]

_IGNORE = ("-1", "0", "V-1", "V", "between_V_D", "at_or_above_max_V_D", "large_negative")
EMBED_EDGES: tuple[str, ...] = tuple(f"ignore:{k}:{p}" for k in _IGNORE for p in ("present", "absent")) + (
    "ids:V-1_present", "vocab:1", "width:1", "batch:1", "ids:empty") + tuple(
    f"id_dtype:{d}" for d in ID_DTYPES if d.startswith("int")) + (
    "float16:partial_sum_overflow",)
#: Kinds of an ignore label read as an index, for embeddings and the pipelines' embedding alike.
_INDEX_EDGES: tuple[str, ...] = ("ignore:negative_row_used", "ignore:outside_rows")
RNN_EDGES: tuple[str, ...] = ("batch:1", "lengths:all_1", "lengths:tied", "lengths:cycle>=3", "state:given",
                              "state:absent", "float16:inputs") + tuple(f"grad_outputs:{g}" for g in GRAD_OUTPUTS)
#: Every edge kind, each with the families it applies to.
EDGE_KINDS: dict[str, tuple[str, ...]] = {**{k: ("embed",) for k in EMBED_EDGES},
                                          **{k: ("lstm", "pipeline") for k in RNN_EDGES},
                                          **{k: ("embed", "pipeline") for k in _INDEX_EDGES}}

_LARGE_NEGATIVE = -(2 ** 20)


def _ignore_kind(il: int, vocab: int, width: int) -> str | None:
    if il == -1:
        return "-1"
    if il == 0:
        return "0"
    if il == vocab - 1:
        return "V-1"
    if il == vocab:
        return "V"
    if vocab < il < width:
        return "between_V_D"
    if il >= max(vocab, width):
        return "at_or_above_max_V_D"
    if il <= _LARGE_NEGATIVE:
        return "large_negative"
    return None


def _cycles(lengths: Sequence[int]) -> int:
    """The longest cycle of the permutation that sorts ``lengths`` by decreasing length (stably)."""
    perm = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    seen, longest = set(), 0
    for start in range(len(perm)):
        n, i = 0, start
        while i not in seen:
            seen.add(i)
            i = perm[i]
            n += 1
        longest = max(longest, n)
    return longest


def _partial_sum_overflows(spec: Mapping[str, Any], arrays: dict[str, np.ndarray]) -> bool:
    """Whether some row of ``grad.W``, summed one id at a time in index order in float16 (what Chainer's
    scatter-add does), passes float16's largest value while the exact sum of the same terms fits: the
    condition of the edge ``float16:partial_sum_overflow``, found in the case's own arrays, so that a drawn case
    that reaches it is matched by the contracts' rule as the hand-made edge case is (the rule follows the
    condition, not the case that first showed it)."""
    gy, x = arrays.get("gy"), arrays.get("x")
    if (gy is None or x is None or gy.dtype != np.float16 or "w_shape" in spec or not x.size
            or gy.size % x.size):
        return False
    top = float(np.finfo(np.float16).max)
    x = np.asarray(x).ravel()
    terms = np.asarray(gy).reshape(x.size, -1).astype(np.float64)
    il = spec.get("ignore_label")
    keep = x != il if isinstance(il, int) else np.ones(x.size, bool)  # an ignored id adds nothing to grad.W
    order = np.argsort(x[keep], kind="stable")  # each row's terms together, in index order
    rows, terms = x[keep][order], terms[keep][order]
    if not rows.size or not np.isfinite(terms).all():
        return False
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    # A running sum can pass the top only where the sum of the terms' magnitudes does: the exact check
    # (a float16 accumulation, term by term) runs on those rows alone.
    for a, b in zip(starts, np.r_[starts[1:], rows.size]):
        seg = terms[a:b]
        if np.abs(seg).sum(axis=0).max() <= top:
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            running = np.add.accumulate(seg.astype(np.float16), axis=0, dtype=np.float16)
        if (np.isinf(running).any(axis=0) & (np.abs(seg.sum(axis=0)) <= top)).any():
            return True
    return False


def _ignore_as_index(il: object, vocab: int, ids: np.ndarray | None) -> set[str]:
    """The kinds an ignore label reaches read as an index (``W[il]``, a one-hot column ``xi[:, il]``): a label in
    [-V, 0) names row V + il, which a valid id may use; a label at or past V, or below -V, names no row."""
    if not isinstance(il, int) or isinstance(il, bool):
        return set()
    out = set()
    if -vocab <= il < 0 and ids is not None and (ids == vocab + il).any():
        out.add("ignore:negative_row_used")
    if il >= vocab or il < -vocab:
        out.add("ignore:outside_rows")
    return out


#: Bytes of inputs past which a case's ids are found from a narrow copy of it (:func:`built_ids`).
_NARROW_BYTES = 8 << 20


def built_ids(case: Case) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The case's arrays and its ids flat as float64 (every id dtype, ignore labels of any size, compare
    exactly); ``({}, None)`` where a bad input's arrays do not build, so that the spec alone is judged.

    A large case without explicit arrays (a realistic profile's: 65,000 x 129 tables) is built one wide (width
    and hidden 1): its ids come from their own stream and the spec's id keys alone, so they are the same ids,
    without drawing the tables; its other arrays are then not returned (only the float16 check reads them)."""
    try:
        if (estimate_case_bytes(case) > _NARROW_BYTES and not case.arrays and not case.bad
                and case.spec.get("w_dtype", "float32") != "float16"):
            narrow = {**case.spec, "width": 1}
            narrow.pop("w_shape", None)
            if case.family != "embed":
                narrow["hidden"] = 1
            arrays = build_arrays(Case(case.family, case.seed, narrow, schema=False))
            return {}, np.asarray(arrays["x"]).astype(np.float64).ravel()
        arrays = build_arrays(case)
        return arrays, np.asarray(arrays["x"]).astype(np.float64).ravel()
    except Exception:  # noqa: BLE001 - a bad input's arrays may not build
        return {}, None


#: The edge kinds of each case content (:func:`edge_kinds` builds a case's ids to find them: every corpus built
#: again, the default one at each report and gate, tags the same real-scale cases again).
_KINDS: ContentMemo[frozenset[str]] = ContentMemo()


def edge_kinds(case: Case) -> set[str]:
    """The edge kinds ``case`` reaches (:data:`EDGE_KINDS`), the size boundaries (:data:`SIZE_EDGES`) and the
    recipe dimensions' boundaries it crosses (``lstm.steps>=512``:
    :func:`harness.generate.dimensions.dimension_kinds`)."""
    return set(_KINDS.get(case, lambda c: frozenset(_edge_kinds(c))))


def _edge_kinds(case: Case) -> set[str]:
    s = case.spec
    out: set[str] = set()
    if case.family == "embed":
        vocab, width, shape = int(s["vocab"]), int(s["width"]), list(s["ids_shape"])
        n = int(np.prod(shape)) if shape else 1
        arrays, ids = built_ids(case) if n <= 200_000 else ({}, None)
        il = s.get("ignore_label")
        if isinstance(il, int):
            kind = _ignore_kind(il, vocab, width)
            if kind is not None and ids is not None:
                out.add(f"ignore:{kind}:{'present' if (ids == il).any() else 'absent'}")
        out |= _ignore_as_index(il, vocab, ids)
        if ids is not None and (ids == vocab - 1).any():
            out.add("ids:V-1_present")
        if vocab == 1:
            out.add("vocab:1")
        if width == 1:
            out.add("width:1")
        if n == 1:
            out.add("batch:1")
        if n == 0 or "ids:empty" in case.tags:
            out.add("ids:empty")
        out.add(f"id_dtype:{s.get('id_dtype', 'int32')}")
        if "edge:float16:partial_sum_overflow" in case.tags or (ids is not None and _partial_sum_overflows(s, arrays)):
            out.add("float16:partial_sum_overflow")
        return out | size_edge_kinds(case, ids) | dimension_kinds(case, ids)
    if case.family not in ("lstm", "pipeline"):  # a model case draws its own inputs: none of these kinds apply
        return out
    built = built_ids(case)[1] if case.family == "pipeline" else None
    if case.family == "pipeline":  # its ids feed an embedding: the ignore label's index kinds apply there too
        out |= _ignore_as_index(s.get("ignore_label"), int(s["vocab"]), built)
    out |= size_edge_kinds(case, built) | dimension_kinds(case, built)
    lengths = [int(n) for n in s["lengths"]]
    if len(lengths) == 1:
        out.add("batch:1")
    if lengths and all(n == 1 for n in lengths):
        out.add("lengths:all_1")
    if len(set(lengths)) < len(lengths):
        out.add("lengths:tied")
    if _cycles(lengths) >= 3:
        out.add("lengths:cycle>=3")
    out.add("state:given" if s.get("initial_state", "none") == "given" else "state:absent")
    if s.get("dtype", "float32") == "float16":
        out.add("float16:inputs")
    out.add(f"grad_outputs:{s.get('grad_outputs', 'all')}")
    return out


def _embed(seed: int, kind: str, **spec) -> Case:
    return Case("embed", seed, {"vocab": 5, "width": 4, "ids_shape": [12], **spec}, tags=(f"edge:{kind}",))


def edge_cases() -> list[Case]:
    """One small, valid case for every edge kind (some reach several)."""
    out: list[Case] = []
    labels = {"-1": -1, "0": 0, "V-1": 4, "V": 5, "between_V_D": 6, "at_or_above_max_V_D": 9,
              "large_negative": _LARGE_NEGATIVE}
    for k, il in labels.items():
        width = 8 if k in ("between_V_D", "at_or_above_max_V_D") else 4
        out.append(_embed(101, f"ignore:{k}:present", ignore_label=il, ignore_frac=0.3, width=width))
        out.append(_embed(102, f"ignore:{k}:absent", ignore_label=il, ignore_frac=0.0, width=width,
                          id_kind="all_equal" if k in ("0", "V-1") else "uniform"))
    out += [_embed(103, "vocab:1", vocab=1), _embed(104, "width:1", width=1), _embed(105, "batch:1", ids_shape=[1]),
            Case("embed", 106, {"vocab": 5, "width": 4, "ids_shape": [0]}, tags=("edge:ids:empty", "ids:empty")),
            _embed(107, "ids:V-1_present", vocab=3, ids_shape=[30])]
    for d in ID_DTYPES:
        if d.startswith("int"):  # float and unsigned ids are bad inputs (their own rules), not edges of valid ones
            out.append(_embed(110, f"id_dtype:{d}", id_dtype=d))
    # float16: a row's gradient summed from +40000, +40000, -40000: the running sum passes 65,504 (inf) while the
    # exact total (40000) fits; the oracle says 40000, so an inf there is a real finding, not rounding.
    gy = np.array([[40000.0, 1.0], [40000.0, 1.0], [-40000.0, 1.0]], dtype=np.float16)
    out.append(Case("embed", 120, {"vocab": 2, "width": 2, "ids_shape": [3], "w_dtype": "float16",
                                   "id_kind": "all_equal"}, arrays={"gy": encode_array(gy)},
                    tags=("edge:float16:partial_sum_overflow",)))
    rnn = {"n_layers": 1, "in_size": 3, "hidden": 4}
    out += [
        Case("lstm", 201, {**rnn, "lengths": [3]}, tags=("edge:batch:1",)),
        Case("lstm", 202, {**rnn, "lengths": [1, 1, 1]}, tags=("edge:lengths:all_1",)),
        Case("lstm", 203, {**rnn, "lengths": [4, 2, 2, 1]}, tags=("edge:lengths:tied",)),
        Case("lstm", 204, {**rnn, "lengths": [2, 3, 1, 4]}, tags=("edge:lengths:cycle>=3",)),
        Case("lstm", 205, {**rnn, "lengths": [3, 2], "initial_state": "given"}, tags=("edge:state:given",)),
        Case("lstm", 206, {**rnn, "lengths": [3, 2], "dtype": "float16"}, tags=("edge:float16:inputs",)),
    ]
    for g in GRAD_OUTPUTS:
        if g != "all":
            out.append(Case("lstm", 210, {**rnn, "lengths": [3, 2, 2, 1], "grad_outputs": g},
                            tags=(f"edge:grad_outputs:{g}", f"grad:{g}")))
            out.append(Case("pipeline", 211, {"vocab": 7, "width": 3, "hidden": 4, "n_layers": 1, "lengths": [3, 2, 1],
                                              "ignore_label": -1, "grad_outputs": g},
                            tags=(f"edge:grad_outputs:{g}", f"grad:{g}")))
    return [with_edge_tags(Case(c.family, c.seed, c.spec, c.arrays, c.expect, tuple(c.tags) + ("edges",)))
            for c in out]


def with_edge_tags(case: Case) -> Case:
    """``case`` with an ``edge:<kind>`` tag for every edge kind it reaches, so that a rule or a known defect of
    the contracts file can name the edge (a generated case that happens to reach one is matched too)."""
    tags = {f"edge:{k}" for k in edge_kinds(case)} - set(case.tags)
    if not tags:
        return case
    # schema=False: ``case`` passed the schema when it was made, and the tags added are this module's own names
    # (strings, as the schema's ``tags`` asks); re-checking the whole case was a third of the generators' schema
    # time. The case's own rules still run.
    return Case(case.family, case.seed, case.spec, case.arrays, case.expect, tuple(case.tags) + tuple(sorted(tags)),
                schema=False)


def coverage_rows(cases: Iterable[Case]) -> list[dict[str, object]]:
    """Per edge kind: how many cases of the corpus reach it, and of which families (0 where none does)."""
    counts: dict[str, int] = {k: 0 for k in EDGE_KINDS}
    fams: dict[str, set[str]] = {k: set() for k in EDGE_KINDS}
    for c in cases:
        for k in edge_kinds(c):
            if k in counts:
                counts[k] += 1
                fams[k].add(c.family)
    return [{"edge": k, "families": ", ".join(EDGE_KINDS[k]), "cases": counts[k],
             "seen in": ", ".join(sorted(fams[k])) or "-"} for k in EDGE_KINDS]


# ---- size boundaries ------------------------------------------------------------------------------------
#: Size boundaries, each with the families it applies to and what happens there: where a flat index leaves
#: int32, a float32 count or sum stops being exact, a float16 count overflows, sequences are hundreds of steps
#: long, and ids pile up on one row. Kept apart from :data:`EDGE_KINDS` (whose every kind :func:`edge_cases`
#: reaches with a small case): most of these need large cases; :func:`size_edge_cases` gives the smallest
#: case of each, and :func:`size_coverage_rows` says which a corpus reaches and what the others need.
SIZE_EDGES: dict[str, tuple[tuple[str, ...], str]] = {
    "size:ids_x_vocab>=2^31": (("embed", "pipeline"), "ids x vocab >= 2^31: the flat index of ESPnet's one-hot "
                                                      "matrix (its GPU backward) leaves int32"),
    "size:rows_x_width>=2^31": (("embed", "pipeline"), "vocab x width or ids x width >= 2^31: the flat index of W "
                                                       "or of the embedded rows leaves int32"),
    "size:batch_x_steps_x_hidden>=2^31": (("lstm", "pipeline"), "batch x longest x hidden x directions >= 2^31: "
                                                                "the padded outputs' flat index leaves int32"),
    "float32:row_count>=2^24": (("embed", "pipeline"), "one row receives >= 2^24 ids: float32 counts them "
                                                       "exactly no further"),
    "float32:reduction_depth>=2^24": (("embed", "lstm", "pipeline"),
                                      "a gradient sums >= 2^24 terms (an embedding's ids in its one-hot GEMM, "
                                      "every step of every sequence in an LSTM's weights)"),
    "float16:row_count>65504": (("embed", "pipeline"), "one row receives more than 65,504 ids, float16's "
                                                       "largest value"),
    "lengths:hundreds": (("lstm", "pipeline"), "a sequence of 100 steps or more"),
    "pileup:row>=1000": (("embed", "pipeline"), "one row receives 1,000 ids or more (as many atomic adds to one "
                                                "address on a GPU)"),
}
_INT32 = 2 ** 31
_F32_EXACT = 2 ** 24
_F16_MAX = 65504


def size_edge_kinds(case: Case, ids: np.ndarray | None = None) -> set[str]:
    """The size boundaries (:data:`SIZE_EDGES`) ``case`` reaches; ``ids`` its built ids where they were built
    (a pile-up is then counted exactly)."""
    s, out = case.spec, set()
    if case.family in ("embed", "pipeline"):
        vocab, width = int(s["vocab"]), int(s["width"])
        if case.family == "embed":
            shape = [int(n) for n in s["ids_shape"]]
            n = int(np.prod(shape)) if shape else 1
        else:
            n = len(s["lengths"]) * max(int(v) for v in s["lengths"])
        if n * vocab >= _INT32:
            out.add("size:ids_x_vocab>=2^31")
        if max(vocab, n) * width >= _INT32:
            out.add("size:rows_x_width>=2^31")
        if n >= _F32_EXACT:
            out.add("float32:reduction_depth>=2^24")
        pile = row_pileup(case, ids)
        for kind, at in (("float32:row_count>=2^24", _F32_EXACT), ("float16:row_count>65504", _F16_MAX + 1),
                         ("pileup:row>=1000", 1000)):
            if pile >= at:
                out.add(kind)
    if case.family in ("lstm", "pipeline"):
        lengths = [int(v) for v in s["lengths"]]
        dirs = 2 if s.get("bidirectional", False) else 1
        if len(lengths) * max(lengths, default=0) * int(s["hidden"]) * dirs >= _INT32:
            out.add("size:batch_x_steps_x_hidden>=2^31")
        if sum(lengths) >= _F32_EXACT:
            out.add("float32:reduction_depth>=2^24")
        if max(lengths, default=0) >= 100:
            out.add("lengths:hundreds")
    return out


def size_edge_cases() -> dict[str, Case]:
    """The smallest case of each size boundary (a few reach more than one), tagged ``size-edge``: what
    ``cases --coverage`` prices against a device's memory where a corpus reaches none."""
    def embed(seed: int, kind: str, **spec: object) -> Case:
        return Case("embed", seed, {"width": 1, **spec}, tags=("size-edge", f"edge:{kind}"))

    n16 = _F16_MAX + 32  # over 65,504 ids, all on one row
    return {
        "size:ids_x_vocab>=2^31": embed(301, "size:ids_x_vocab>=2^31", vocab=65_000,
                                        ids_shape=[-(-_INT32 // (65_000 * 40)), 40]),
        "size:rows_x_width>=2^31": embed(302, "size:rows_x_width>=2^31", vocab=2, width=_INT32 // (1 << 15),
                                         ids_shape=[1 << 15]),
        "size:batch_x_steps_x_hidden>=2^31": Case("lstm", 303, {"n_layers": 1, "in_size": 1, "hidden": 1024,
                                                                "bidirectional": True, "lengths": [1024] * 1024},
                                                  tags=("size-edge", "edge:size:batch_x_steps_x_hidden>=2^31")),
        "float32:row_count>=2^24": embed(304, "float32:row_count>=2^24", vocab=1, ids_shape=[_F32_EXACT]),
        "float32:reduction_depth>=2^24": embed(304, "float32:row_count>=2^24", vocab=1, ids_shape=[_F32_EXACT]),
        "float16:row_count>65504": embed(305, "float16:row_count>65504", vocab=2, width=4, ids_shape=[n16],
                                         id_kind="all_equal"),
        "lengths:hundreds": Case("lstm", 306, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [100, 60]},
                                 tags=("size-edge", "edge:lengths:hundreds")),
        "pileup:row>=1000": embed(305, "float16:row_count>65504", vocab=2, width=4, ids_shape=[n16],
                                  id_kind="all_equal"),
    }


#: The size boundaries whose smallest case is cheap on a CPU too (seconds, well under a GiB): the realistic
#: profile's corpus runs them. The others need gigabytes, or tens of millions of ids through a Python loop
#: (Chainer's CPU embedding backward adds one id at a time): ``cases --coverage`` says what each needs.
CHEAP_SIZE_EDGES = ("size:ids_x_vocab>=2^31", "float16:row_count>65504", "lengths:hundreds", "pileup:row>=1000")


#: Why a corpus leaves out a size boundary whose smallest case fits a device's memory.
_LEFT_OUT = {k: "16.8 million ids, which Chainer's CPU backward adds one at a time (minutes a run)"
             for k in ("float32:row_count>=2^24", "float32:reduction_depth>=2^24")}


def size_coverage_rows(cases: Iterable[Case], memory: dict[str, int],
                       peak: Callable[[Case, str], int]) -> list[dict[str, object]]:
    """Per size boundary: how many cases of the corpus reach it, and where none does, what its smallest case
    (:func:`size_edge_cases`) needs at its peak (``peak(case, device)``) against each device's ``memory``: "needs
    N GiB" where it does not fit, else that it fits and is left out (never a silent blank)."""
    counts = {k: 0 for k in SIZE_EDGES}
    for c in cases:
        for k in size_edge_kinds(c, built_ids(c)[1] if small_ids(c) else None):
            counts[k] += 1
    witnesses = size_edge_cases()
    rows: list[dict[str, object]] = []
    for k, (families, what) in SIZE_EDGES.items():
        row: dict[str, object] = {"boundary": k, "families": ", ".join(families), "cases": counts[k]}
        for device, have in memory.items():
            if counts[k]:
                row[device] = "reached"
                continue
            need = peak(witnesses[k], device)
            row[device] = (f"needs {_gib(need)} (has {_gib(have)})" if need > have
                           else f"fits ({_gib(need)} of {_gib(have)}); left out: {_LEFT_OUT.get(k, 'not drawn')}")
        row["what"] = what
        rows.append(row)
    return rows


def small_ids(case: Case) -> bool:
    """Whether ``case``'s ids are few enough to build for an exact count (as :func:`edge_kinds` does)."""
    s = case.spec
    if case.family == "embed":
        return int(np.prod(s["ids_shape"])) <= 200_000 if s["ids_shape"] else True
    return case.family == "pipeline" and len(s["lengths"]) * max(s["lengths"]) <= 200_000


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{max(n, 0) / (1 << 20):.0f} MiB"
