"""The tags a case can carry, as the generators write them: what a contracts file's ``tag``/``tags`` may name.

A tag is ``kind:value``. For the kinds whose values are a closed set (``bad``, ``edge``, ``ids``, ``grad``,
``lengths``, ``ignore_frac``, ``w_rank``, ``relation``, ``scale``) the value must be one of it; for the others
(``ignore``, ``inject``, ``uses``: a label or an array name; ``user``: your own corpus's) the kind must be known.
:func:`tag_problem` says, in one phrase, why a tag names nothing a generator makes (``contracts check`` refuses
such a rule: it could never apply, so the judgement it declares would never be made).
"""

from __future__ import annotations

from typing import Mapping

from harness.core.schemas import GRAD_OUTPUTS
from harness.core.vocabulary import RELATIONS

__all__ = ["TAG_VALUES", "OPEN_TAG_KINDS", "tag_problem"]

#: The tag kinds whose values are an open set (an ignore label as the generator names it, an array name, and
#: ``user:``, the kind a corpus of your own may tag its cases with).
OPEN_TAG_KINDS = ("ignore", "inject", "uses", "user")


def _values() -> Mapping[str, tuple[str, ...]]:
    from harness.generate.bad_kinds import BAD_KINDS
    from harness.generate.case_builders import ID_DISTRIBUTIONS, LENGTH_PATTERNS
    from harness.generate.edges import EDGE_KINDS

    return {"bad": tuple(BAD_KINDS), "edge": tuple(EDGE_KINDS), "ids": (*ID_DISTRIBUTIONS, "empty"),
            "grad": tuple(GRAD_OUTPUTS), "lengths": (*LENGTH_PATTERNS, "ties"),
            "ignore_frac": ("some", "all", "zero"), "w_rank": ("1", "3"), "relation": RELATIONS, "scale": ("hot",)}


#: kind -> the values a generator writes (computed once, on first use).
TAG_VALUES: dict[str, tuple[str, ...]] = {}


def tag_problem(tag: str) -> str | None:
    """Why ``tag`` is no tag a generator writes (one phrase), or None when it is one."""
    if not TAG_VALUES:
        TAG_VALUES.update(_values())
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
