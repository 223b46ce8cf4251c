"""Invariance relations as data: is a sequence's result the same whatever else is in its batch?

A :class:`Relation` turns a case into related cases (its *members*), each a real :class:`Case` whose
transformed arrays are explicit (so a member replays from its JSON alone) and whose spec records where it
came from (``spec["relation"] = {"name", "base", "label", "index"}``). :func:`pairs` says which tensor of a
member corresponds to which tensor, or which rows of a tensor, of the base case, so the measure pass can
judge them bit for bit (:func:`harness.judge.verdicts.judge_pair` with ``kind="relation"``):

- ``alone``: a sequence by itself vs in the batch (lstm, pipeline): its ``ys.i``, its rows of ``hy``/``cy``,
  its ``grad.xs.i`` (and rows of ``grad.hx``/``grad.cx`` where an initial state is given);
- ``subbatch``: the first half, the second half and a seeded random subset of the batch vs the whole batch;
- ``order``: the batch reversed; outputs mapped back; the parameter gradients (sums over the batch in
  another order: equal only within rounding, which the verdict says) compared whole; for embeddings the
  rows of ``x`` reversed with ``gy``, ``y`` rows mapped and ``grad.W`` compared whole;
- ``padding``: (pipeline) extra ignore-label padding columns vs none: every output unchanged, ``grad.W``
  included;
- ``duplicate``: sequence 0 appended again: both copies' outputs bit-identical to each other and to the
  base's.

Parameter gradients sum over the batch, so ``alone``/``subbatch`` do not compare them.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Collection, Iterator, Mapping, Sequence

import numpy as np

from harness.core.cases import Case, build_arrays, encode_array
from harness.core.errors import InvalidArgument
from harness.core.vocabulary import RELATIONS as RELATION_NAMES

__all__ = ["Relation", "Member", "RELATIONS", "get_relation", "parse_relations", "members", "pairs",
           "relation_of", "pair_names", "MAX_CASE_ELEMENTS"]

#: Cases larger than this (elements, :meth:`Case.size`) get no members: their explicit arrays would be large.
MAX_CASE_ELEMENTS = 40_000

_PER_SEQUENCE = re.compile(r"^(xs|gys)\.(\d+)$")
_STATE = ("hx", "cx", "ghy", "gcy")  # (layers * dirs, batch, hidden): the batch is axis 1


@dataclass(frozen=True)
class Relation:
    """One relation: its name, the families it applies to, and what it claims."""

    name: str
    families: tuple[str, ...]
    description: str


RELATIONS: dict[str, Relation] = {r.name: r for r in (
    Relation("alone", ("lstm", "pipeline"), "each of the first sequences run by itself gives its outputs in the batch"),
    Relation("subbatch", ("lstm", "pipeline", "embed"),
             "a prefix, a suffix and a random subset of the batch give their outputs in the whole batch"),
    Relation("order", ("lstm", "pipeline", "embed"), "the batch reversed gives the same outputs, mapped back"),
    Relation("padding", ("pipeline",), "extra ignore-label padding columns change no output"),
    Relation("duplicate", ("lstm", "pipeline", "embed"),
             "a batch holding sequence 0 twice gives it the same outputs twice"),
)}
assert tuple(RELATIONS) == RELATION_NAMES


@dataclass(frozen=True)
class Member:
    """A related case: which relation made it, from which base, and ``index[j]``: the base's batch row that
    the member's row ``j`` holds."""

    relation: str
    label: str
    case: Case
    base: str
    index: tuple[int, ...]


def get_relation(name: str) -> Relation:
    """The relation called ``name`` (one line naming the known ones otherwise)."""
    try:
        return RELATIONS[name]
    except KeyError:
        raise InvalidArgument(f"relation={name!r} is not one of {', '.join(RELATIONS)}") from None


def parse_relations(text: str | Sequence[str] | None) -> list[Relation]:
    """A comma list of relation names (or the names); ``all`` (or None) is every relation, ``none`` (or ``''``)
    is none."""
    if text is not None and not isinstance(text, str):
        text = ",".join(text)
    if text is None or text.strip() == "all":
        return list(RELATIONS.values())
    if text.strip() in ("", "none"):
        return []
    return [get_relation(p.strip()) for p in text.split(",") if p.strip()]


def relation_of(case: Case) -> Mapping[str, Any] | None:
    """The provenance of a member case (``name``, ``base``, ``label``, ``index``), None for a base case."""
    rel = case.spec.get("relation")
    return rel if isinstance(rel, Mapping) else None


def _batch(case: Case) -> int:
    if case.family == "embed":
        shape: Sequence[int] = case.spec.get("ids_shape") or ()
        return int(shape[0]) if len(shape) >= 2 else 0  # a 1-D id vector has no batch rows to reorder
    return len(case.spec.get("lengths") or ())


def _indices(rel: str, n: int, seed: int) -> list[tuple[str, tuple[int, ...]]]:
    """The member row selections of one relation over a batch of ``n``: (label, base rows)."""
    if rel == "alone":
        return [(f"seq{i}", (i,)) for i in range(min(n, 3))]
    if rel == "subbatch":
        half = n // 2
        rng = random.Random(f"subbatch|{seed}")
        subset = tuple(sorted(rng.sample(range(n), max(1, n // 2))))
        out = [("prefix", tuple(range(half))), ("suffix", tuple(range(half, n))), ("subset", subset)]
        return [(lab, idx) for lab, idx in out if 0 < len(idx) < n]
    if rel == "order":
        return [("reversed", tuple(reversed(range(n))))]
    if rel == "duplicate":
        return [("seq0-twice", tuple(range(n)) + (0,))]
    if rel == "padding":
        return [("padded", tuple(range(n)))]
    raise InvalidArgument(f"relation={rel!r} is not one of {', '.join(RELATIONS)}")


def _member_arrays(case: Case, rel: str, idx: Sequence[int], base: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The member's transformed arrays (everything else regenerates identically from the same seed)."""
    out: dict[str, np.ndarray] = {}
    if case.family == "embed":
        sel = np.asarray(idx, dtype=np.int64)
        out["x"] = base["x"][sel]
        out["gy"] = base["gy"][sel]
        return out
    for name, a in base.items():
        m = _PER_SEQUENCE.match(name)
        if m is not None:
            continue
        if name in _STATE:
            out[name] = np.ascontiguousarray(a[:, list(idx)])
    for j, i in enumerate(idx):
        for prefix in ("xs", "gys"):
            if f"{prefix}.{i}" in base:
                out[f"{prefix}.{j}"] = base[f"{prefix}.{i}"]
    if case.family == "pipeline":
        lengths = [int(case.spec["lengths"][i]) for i in idx]
        x = base["x"][list(idx), :max(lengths)]
        if rel == "padding":
            il = case.spec.get("ignore_label")
            pad = np.full((x.shape[0], 3), -1 if il is None else il, dtype=x.dtype)
            x = np.concatenate([base["x"][list(idx)], pad], axis=1)
        out["x"] = np.ascontiguousarray(x)
    return out


def members(case: Case, relations: Sequence[Relation]) -> list[Member]:
    """The related cases of ``case`` under each relation that applies to it (none for a bad input, a member,
    a case with dropout, a batch of one, upstream gradients on some sequences only, or a case over
    :data:`MAX_CASE_ELEMENTS`)."""
    if case.bad or relation_of(case) is not None or float(case.spec.get("dropout", 0.0) or 0.0) > 0:
        return []
    if "edges" in case.tags:
        return []  # the edge set is about single inputs at a boundary; the relation cases are chosen apart
    if "real-scale" in case.tags or "scale:slice" in case.tags:
        return []  # a real model's shapes run for seconds: members would multiply them in every default campaign
    if str(case.spec.get("grad_outputs", "all")).endswith("ys_some"):
        return []  # which sequences receive a gradient depends on the batch: a member's would not correspond
    n = _batch(case)
    try:
        too_big = case.size() > MAX_CASE_ELEMENTS
    except Exception:  # noqa: BLE001 - a spec without a size has no members
        return []
    if n < 2 or too_big:
        return []
    base = build_arrays(case)
    out = []
    for rel in relations:
        if case.family not in rel.families:
            continue
        for label, idx in _indices(rel.name, n, case.seed):
            spec = dict(case.spec)
            spec["relation"] = {"name": rel.name, "base": case.id, "label": label, "index": list(idx)}
            if case.family == "embed":
                spec["ids_shape"] = [len(idx), *list(case.spec["ids_shape"])[1:]]
            else:
                spec["lengths"] = [int(case.spec["lengths"][i]) for i in idx]
            arrays = {k: encode_array(v) for k, v in _member_arrays(case, rel.name, idx, base).items()}
            tags = tuple(t for t in case.tags) + (f"relation:{rel.name}",)
            member = Case(case.family, case.seed, spec, arrays=arrays, tags=tags)
            out.append(Member(rel.name, label, member, case.id, tuple(idx)))
    return out


def _rows(a: np.ndarray, rows: Sequence[int], axis: int) -> np.ndarray:
    return np.ascontiguousarray(np.take(a, list(rows), axis=axis))


def pair_names(family: str, relation: str, index: Sequence[int], base: Collection[str],
               member: Collection[str] = ()) -> list[tuple[str, tuple[int, ...] | None, int, str]]:
    """``(base tensor, its rows or None for the whole tensor, the rows' axis, member tensor)`` of every tensor
    the relation says must correspond: per-sequence outputs by index, batch rows of states, and (``order``,
    ``padding``) the parameter gradients whole. ``base``/``member``: the names each run recorded."""
    idx = tuple(int(i) for i in index)
    names = set(base) | set(member)
    whole = relation in ("order", "padding")
    out: list[tuple[str, tuple[int, ...] | None, int, str]] = []
    if family == "embed":
        out += [(n, idx, 0, n) for n in ("y", "grad2.gy") if n in names]
        if whole and "grad.W" in names:
            out.append(("grad.W", None, 0, "grad.W"))
        return out
    for j, i in enumerate(idx):
        for prefix in ("ys", "grad.xs"):
            if f"{prefix}.{i}" in base or f"{prefix}.{j}" in member:
                out.append((f"{prefix}.{i}", None, 0, f"{prefix}.{j}"))
    out += [(n, idx, 1, n) for n in ("hy", "cy", "grad.hx", "grad.cx") if n in names]
    if whole:
        out += [(n, None, 0, n) for n in sorted(base) if n.startswith(("grad.ws.", "grad.bs.")) or n == "grad.W"]
    return out


def pairs(family: str, relation: str, index: Sequence[int], base: Mapping[str, np.ndarray],
          member: Mapping[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray | None, np.ndarray | None]]:
    """``(label, base part, member part)`` of every tensor :func:`pair_names` pairs; ``duplicate`` also pairs
    the two copies of sequence 0 with each other."""
    idx = list(index)
    for name, rows, axis, other in pair_names(family, relation, idx, base, member):
        part = base.get(name)
        if part is not None and rows is not None:
            part = _rows(part, rows, axis)
        yield (name if name == other else f"{name} as {other}", part, member.get(other))
    if family == "embed":
        if relation == "duplicate" and "y" in member:
            yield ("y[0] twice", member["y"][0], member["y"][len(idx) - 1])
        return
    if relation == "duplicate":
        last = len(idx) - 1
        for prefix in ("ys", "grad.xs"):
            a, b = member.get(f"{prefix}.0"), member.get(f"{prefix}.{last}")
            if a is not None or b is not None:
                yield (f"{prefix}.0 twice", a, b)
