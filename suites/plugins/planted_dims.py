"""Planted regressions, one per recipe dimension (``harness.generate.recipes.DIMENSIONS``): each a shipped subject
whose first output is scaled by 1.01 only where the case's size in that one dimension is at least the dimension's
last boundary below the recipes' maximum (800 steps cross 512; 154,624 ids cross 2^16; ...), as a release that
changes its bits only past one size would ship.

``SUBJECTS`` names them ``planted.<family>.<dimension>`` (load with ``--subject-plugin
suites.plugins.planted_dims:SUBJECTS``); :func:`planted` makes one. Importing this module registers nothing. The
call is ``planted_calls.past_boundary``. Not part of the harness.
"""

from __future__ import annotations

import dataclasses

from harness.generate.recipes import DIMENSIONS, Dimension
from harness.subjects.base import Subject
from harness.subjects.call_runs import call_run
from harness.subjects.registry import get_subject
from suites.plugins import planted_calls

__all__ = ["SUBJECTS", "SHIPPED", "planted"]

#: Per family: the shipped subject a plant wraps, and its call in ``harness.subjects.library_calls``.
SHIPPED = {"embed": ("chainer.embed_id", "embed_function"), "lstm": ("chainer.NStepLSTM", "lstm_link"),
           "pipeline": ("pipeline.embed_lstm", "embed_lstm")}


def planted(d: Dimension) -> Subject:
    """The shipped subject of ``d``'s family, changed past ``d``'s last boundary (:attr:`Dimension.top`)."""
    shipped, call = SHIPPED[d.family]
    return dataclasses.replace(
        get_subject(shipped), name=f"planted.{d.family}.{d.name}",
        run=call_run(planted_calls.past_boundary, call=call, family=d.family, dimension=d.name, at=d.top),
        description=f"{shipped} with its first output times 1.01 where {d.name} >= {d.top}")


SUBJECTS = tuple(planted(d) for d in DIMENSIONS)
