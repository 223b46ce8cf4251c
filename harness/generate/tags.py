"""The tags a case can carry, as the generators write them: what a contracts file's ``tag``/``tags`` may name.

A tag is ``kind:value``, or one of a few bare words (:data:`BARE_TAGS`). For the kinds whose values are a closed set
(``bad``, ``edge``, ``ids``, ``grad``, ``lengths``, ``ignore_frac``, ``w_rank``, ``relation``, ``scale``, ``recipe``,
``convention``, ``corner``, ``slice``) the value must be one of it; for the others
(``ignore``, ``inject``, ``uses``: a label or an array name; ``user``: your own corpus's) the kind must be known.
:func:`tag_problem` says, in one phrase, why a tag names nothing a generator makes (``contracts check`` refuses
such a rule: it could never apply, so the judgement it declares would never be made).
"""

from __future__ import annotations

from typing import Mapping

from harness.core.schemas import GRAD_OUTPUTS
from harness.core.vocabulary import RELATIONS

__all__ = ["TAG_VALUES", "OPEN_TAG_KINDS", "BARE_TAGS", "tag_problem"]

#: The tag kinds whose values are an open set (an ignore label as the generator names it, an array name, and
#: ``user:``, the kind a corpus of your own may tag its cases with).
OPEN_TAG_KINDS = ("ignore", "inject", "uses", "user")
#: The tags without a kind the corpora write: what a case is for (``anchor``, ``real-scale``, ``relations``,
#: ``corner``, ``edges``) or a feature a rule may single out (``dropout``, ``bi``, ``collision``, ``unsorted``,
#: ``blas-split``: an anchor whose product OpenBLAS splits over threads).
BARE_TAGS = ("anchor", "bi", "blas-split", "collision", "corner", "dropout", "edges", "real-scale", "relations",
             "unsorted")


def _values() -> Mapping[str, tuple[str, ...]]:
    from harness.core.schemas import ID_DTYPES
    from harness.generate.bad_kinds import BAD_KINDS
    from harness.generate.case_builders import ID_DISTRIBUTIONS, LENGTH_PATTERNS
    from harness.generate.dimensions import BOUNDARIES, dimension_kind
    from harness.generate.edges import EDGE_KINDS, SIZE_EDGES
    from harness.generate.model_cases import MODEL_SCALES, MODEL_TAGS
    from harness.generate.recipes import RECIPES, SCALES

    # every kind edges.edge_kinds writes: the edge kinds, the size boundaries, each recipe dimension's boundaries
    # and the ids' dtype (a bad input's float ids included)
    edges = (*EDGE_KINDS, *SIZE_EDGES, *(dimension_kind(f, n, b) for (f, n), bs in BOUNDARIES.items() for b in bs),
             *(f"id_dtype:{d}" for d in ID_DTYPES))
    recipes = tuple(dict.fromkeys([*(r.name for r in RECIPES), *(t.split(":", 1)[1] for t in MODEL_TAGS.values())]))
    return {"bad": tuple(BAD_KINDS), "edge": tuple(dict.fromkeys(edges)), "ids": (*ID_DISTRIBUTIONS, "empty"),
            "grad": tuple(GRAD_OUTPUTS), "lengths": (*LENGTH_PATTERNS, "ties", "sorted"),
            "ignore_frac": ("some", "all", "zero"), "w_rank": ("1", "3"), "relation": RELATIONS,
            "scale": tuple(dict.fromkeys(("hot", *SCALES, *MODEL_SCALES))), "recipe": recipes,
            "convention": tuple(dict.fromkeys(r.convention for r in RECIPES)),
            "corner": tuple(f"{f}.{n}" for f, n in BOUNDARIES), "slice": ("width",)}


#: kind -> the values a generator writes (computed once, on first use).
TAG_VALUES: dict[str, tuple[str, ...]] = {}


def tag_problem(tag: str) -> str | None:
    """Why ``tag`` is no tag a generator writes (one phrase), or None when it is one."""
    if not TAG_VALUES:
        TAG_VALUES.update(_values())
    if tag in BARE_TAGS:
        return None
    kind, sep, value = tag.partition(":")
    if not sep or not kind or not value:
        return "is not a case tag (kind:value, e.g. bad:float_ids or ids:empty)"
    if kind in OPEN_TAG_KINDS:
        return None
    if kind not in TAG_VALUES:
        return f"names no kind of tag a generator writes ({', '.join(sorted([*TAG_VALUES, *OPEN_TAG_KINDS]))})"
    if value not in TAG_VALUES[kind]:
        shown = TAG_VALUES[kind] if len(TAG_VALUES[kind]) <= 12 else (*TAG_VALUES[kind][:12], "...")
        return f"is no {kind}: tag a generator writes ({', '.join(shown)})"
    return None
