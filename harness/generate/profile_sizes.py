"""The sizes of the cases each profile draws, and whether a given spec lies inside what a profile can draw.

:data:`SIZE_BOUNDS` holds the bounds of each family per profile (``ci``, ``dev``, ``audit``, ``realistic``);
:func:`bounds_for` returns one of them, in the keyword arguments of the family's strategy. :func:`in_support`
answers the reverse question (could the strategies of a profile draw this case?), so that hand-written cases,
such as the parameter combinations of Chainer's own tests, can be checked against the strategies' reach.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from harness.core.cases import FAMILIES, FLOAT_DTYPES
from harness.generate.strategy_bounds import SIGNED_ID_DTYPES, check_family

__all__ = ["SIZE_BOUNDS", "bounds_for", "in_support"]


#: Bounds of each family's strategy per profile. ``ci`` fits a 2-core machine with no GPU;
#: ``audit`` reaches sizes where GPU atomics race (up to 100k ids piled onto <= 16 rows).
SIZE_BOUNDS: dict[str, dict[str, dict[str, Any]]] = {
    "ci": {
        "embed": {"min_vocab": 1, "max_vocab": 1000, "min_width": 1, "max_width": 16, "max_ids": 64,
                  "id_dtypes": SIGNED_ID_DTYPES, "w_dtypes": FLOAT_DTYPES, "allow_empty": True},
        "lstm": {"min_batch": 1, "max_batch": 8, "min_len": 1, "max_len": 6, "max_layers": 3,
                 "max_in": 8, "max_hidden": 8, "dtypes": ("float32",), "allow_dropout": True},
        "pipeline": {"min_batch": 1, "max_batch": 8, "min_len": 1, "max_len": 6, "max_layers": 2,
                     "min_vocab": 1, "max_vocab": 1000, "min_width": 1, "max_width": 8,
                     "max_hidden": 8, "dtypes": ("float32",)},
    },
    "dev": {
        "embed": {"min_vocab": 1, "max_vocab": 20_000, "min_width": 1, "max_width": 64, "max_ids": 4096,
                  "id_dtypes": SIGNED_ID_DTYPES, "w_dtypes": FLOAT_DTYPES, "allow_empty": True},
        "lstm": {"min_batch": 1, "max_batch": 32, "min_len": 1, "max_len": 24, "max_layers": 5,
                 "max_in": 32, "max_hidden": 32, "dtypes": ("float32", "float64"), "allow_dropout": True},
        "pipeline": {"min_batch": 1, "max_batch": 16, "min_len": 1, "max_len": 24, "max_layers": 3,
                     "min_vocab": 1, "max_vocab": 20_000, "min_width": 1, "max_width": 32,
                     "max_hidden": 32, "dtypes": ("float32", "float64")},
    },
    "audit": {
        "embed": {"min_vocab": 1, "max_vocab": 50_000, "min_width": 1, "max_width": 64, "max_ids": 100_000,
                  "id_dtypes": SIGNED_ID_DTYPES, "w_dtypes": FLOAT_DTYPES, "allow_empty": True},
        "lstm": {"min_batch": 1, "max_batch": 64, "min_len": 1, "max_len": 64, "max_layers": 5,
                 "max_in": 128, "max_hidden": 128, "dtypes": ("float16", "float32", "float64"),
                 "allow_dropout": True},
        "pipeline": {"min_batch": 1, "max_batch": 64, "min_len": 1, "max_len": 64, "max_layers": 3,
                     "min_vocab": 1, "max_vocab": 50_000, "min_width": 1, "max_width": 64,
                     "max_hidden": 64, "dtypes": ("float16", "float32", "float64")},
    },
    # The envelope of harness.generate.recipes.RECIPES at full scale; the realistic profile draws around the
    # table's rows (recipes.recipe_cases), not uniformly within these bounds.
    "realistic": {
        "embed": {"min_vocab": 1, "max_vocab": 65_000, "min_width": 1, "max_width": 1024, "max_ids": 160_000,
                  "id_dtypes": ("int32",), "w_dtypes": ("float32",), "allow_empty": False},
        "lstm": {"min_batch": 1, "max_batch": 30, "min_len": 1, "max_len": 800, "max_layers": 6,
                 "max_in": 320, "max_hidden": 1024, "dtypes": ("float32",), "allow_dropout": False},
        "pipeline": {"min_batch": 1, "max_batch": 1024, "min_len": 1, "max_len": 151, "max_layers": 2,
                     "min_vocab": 1, "max_vocab": 65_000, "min_width": 1, "max_width": 1024,
                     "max_hidden": 1024, "dtypes": ("float32",)},
    },
}


def bounds_for(profile: str, family: str) -> dict[str, Any]:
    """A copy of :data:`SIZE_BOUNDS` for one profile and family; ``family="all"`` gives
    ``{"embed": {...}, "lstm": {...}, "pipeline": {...}}`` for :func:`harness.generate.strategies.any_case`."""
    check_family("profile", profile, tuple(SIZE_BOUNDS))
    check_family("family", family, FAMILIES + ("all",))
    if family == "all":
        return {f: dict(SIZE_BOUNDS[profile][f]) for f in FAMILIES}
    return dict(SIZE_BOUNDS[profile][family])


def _pattern_of(lengths: Sequence[int]) -> set[str]:
    """The length patterns a list of lengths belongs to."""
    n = len(lengths)
    out = set()
    if len(set(lengths)) == 1:
        out.add("equal")
    if n >= 2 and all(a > b for a, b in zip(lengths, lengths[1:])):
        out.add("decreasing")
    if n >= 2 and all(a < b for a, b in zip(lengths, lengths[1:])):
        out.add("increasing")
    if n >= 3 and list(lengths) not in (sorted(lengths), sorted(lengths, reverse=True)):
        out.add("unsorted")
    if n >= 3 and all(a >= b for a, b in zip(lengths, lengths[1:])) and len(set(lengths)) < n:
        out.add("ties")
    if n >= 2 and max(lengths) > min(lengths) and sorted(lengths)[-2] <= max(min(lengths), max(lengths) // 3):
        out.add("one_long")
    return out


def in_support(family: str, spec: Mapping[str, Any], profile: str = "audit") -> bool:
    """Whether the strategies of ``profile`` can draw a valid case with these parameters (only the keys given
    are checked): the bounds of :data:`SIZE_BOUNDS`, the dtypes, the ignore-label kinds and length patterns."""
    b = bounds_for(profile, family)
    s = dict(spec)
    if family == "embed":
        vocab, width = int(s.get("vocab", 1)), int(s.get("width", 1))
        shape = list(s.get("ids_shape", [1]))
        ok = (b["min_vocab"] <= vocab <= b["max_vocab"] and b["min_width"] <= width <= b["max_width"]
              and 1 <= len(shape) <= 3 and int(np.prod(shape)) <= b["max_ids"]
              and s.get("id_dtype", "int32") in b["id_dtypes"] and s.get("w_dtype", "float32") in b["w_dtypes"])
        il = s.get("ignore_label")
        if il is not None:
            lo = int(np.iinfo(np.dtype(s.get("id_dtype", "int32"))).min)
            ok = ok and (il in (0, vocab - 1) or (il == -1 and lo < 0) or (vocab >= 3 and 1 <= il <= vocab - 2)
                         or vocab <= il <= vocab + 1000 or il == max(-(2**31), lo))
        return bool(ok)
    lengths = [int(n) for n in s.get("lengths", [1])]
    ok = (b["min_batch"] <= len(lengths) <= b["max_batch"] and all(b["min_len"] <= n <= b["max_len"] for n in lengths)
          and 1 <= int(s.get("n_layers", 1)) <= b["max_layers"] and 1 <= int(s.get("hidden", 1)) <= b["max_hidden"]
          and s.get("dtype", "float32") in b["dtypes"] and bool(_pattern_of(lengths)))
    if family == "lstm":
        ok = ok and 1 <= int(s.get("in_size", 1)) <= b["max_in"]
    return bool(ok)
