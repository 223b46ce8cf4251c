"""A contracts file that contradicts itself, or says what the judge can never check, is refused line by line.

:func:`problems` is :func:`validate <harness.judge.contracts.validate>`'s problems and then
:func:`contradictions` (``contracts check`` and ``gate`` call it); each problem is one
``file:line: field=value reason`` line:

- a ``[[contract]]`` line with ``invariant_under`` for a subject whose own declaration on that device is "not
  reproducible" (results that differ run to run cannot be bit-identical to a related case's);
- ``identical_across`` naming the line's own context (a context is trivially identical to itself: the line
  meant another one);
- a ``[[known_defect]]`` whose ``wrong`` names a tensor no subject it covers records (the declaration could
  never match, and the defect would be reported as new);
- a ``tag``/``tags`` no generator writes (:func:`harness.generate.tags.tag_problem`): the rule would never apply;
- a claim the judge can never check (:func:`_never_satisfied`): ``invariant_under`` a relation that makes no related
  case of the subject's family (``padding`` on an embedding), ``identical_across`` a context that never runs on the
  line's device or that the file says is not reproducible there;
- a ``[[known_defect]]`` that could never match (:func:`_defects_never_apply`): no subjects, an oracle among them,
  a device none of them runs on, the same declaration twice.

What one key or the keys of one table say is the schema's (:data:`harness.core.schemas.CONTRACTS`): the version
the integer 1, ``reproducible = false`` with ``identical_across`` or ``invariant_under``, ``*`` in
``identical_across``, ``errors`` outside an ``outcome = "raises"`` rule, an error that is not an exception name.
:func:`refusal` makes the problems one ``harness: error:`` line for a verb that cannot go on (``gate``).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

__all__ = ["OUTPUT_NAMES", "problems", "contradictions", "refusal", "output_name_problem"]

_LSTM = r"hy|cy|ys\.\d+|grad\.(xs\.\d+|hx|cx|ws\.\d+\.[0-7]|bs\.\d+\.[0-7])"
#: The tensor names each family's built-in subjects record (docs/reference.md, "Array names are shared").
OUTPUT_NAMES: Mapping[str, re.Pattern[str]] = {
    "embed": re.compile(r"y|grad\.W|grad2\.W|grad2\.gy"),
    "lstm": re.compile(_LSTM),
    "pipeline": re.compile(r"y|grad\.W|" + _LSTM),
}
_BUILTIN_PREFIXES = ("chainer.", "espnet.", "control.", "oracle.")


def output_name_problem(tensor: str, subjects: Sequence[Any]) -> str | None:
    """Why no subject of ``subjects`` records ``tensor``, or None (a plug-in subject may record any name)."""
    if not subjects or any(not str(getattr(s, "name", "")).startswith(_BUILTIN_PREFIXES) for s in subjects):
        return None
    families = sorted({s.family for s in subjects})
    if any(OUTPUT_NAMES[f].fullmatch(tensor) for f in families if f in OUTPUT_NAMES):
        return None
    kinds = "/".join(families)
    return f"is no tensor {'an' if kinds[0] in 'aeiou' else 'a'} {kinds} subject records (e.g. y, grad.W, ys.0, hy, " \
           f"grad.ws.0.0)"


def contradictions(contracts: Any, subjects: Mapping[str, Any]) -> list[str]:
    """One problem line per self-contradiction or never-applying rule (see the module)."""
    from harness.generate.tags import tag_problem

    out: list[str] = []
    path = contracts.path
    for c in contracts.contracts:
        where = f"{path}:{c.line}"
        s = subjects.get(c.subject)
        if c.invariant_under and s is not None:
            declared = s.declared_for(c.device)
            if declared.deterministic is False:
                out.append(f"{where}: invariant_under={list(c.invariant_under)!r} on subject {c.subject} on "
                           f"{c.device}, which declares itself not reproducible there ({declared.reason}): results "
                           f"that differ run to run cannot be bit-identical to a related case's")
        if c.context != "*" and c.context in c.identical_across:
            out.append(f"{where}: identical_across={list(c.identical_across)!r} names the line's own "
                       f"context={c.context!r}: a context is identical to itself; name the other context")
        out += _never_satisfied(contracts, c, s, where)
    for r in contracts.bad_inputs:
        why = tag_problem(r.tag)
        if why is not None and ":" in r.tag:  # a tag without a kind is validate's own problem
            out.append(f"{path}:{r.line}: tag={r.tag!r} {why}: the rule would never apply")
    out += _defects_never_apply(contracts, subjects)
    for d in contracts.known_defects:
        where = f"{path}:{d.line}"
        for t in d.tags:
            why = tag_problem(t)
            if why is not None and ":" in t:
                out.append(f"{where}: tags={list(d.tags)!r}: {t!r} {why}: the declaration would never apply")
        covered = [s for n, s in subjects.items() if (d.subjects == ("*",) or n in d.subjects)
                   and getattr(s, "role", "subject") != "oracle"]
        for name in d.wrong:
            why = output_name_problem(name, covered)
            if why is not None:
                out.append(f"{where}: wrong={list(d.wrong)!r}: {name!r} {why}")
    return out


def _never_satisfied(contracts: Any, c: Any, subject: Any, where: str) -> list[str]:
    """The rules of contract line ``c`` the judge can never check: a relation that makes no related case of the
    subject's family (``padding`` on an embedding), a context in ``identical_across`` that never runs on the
    line's device, or that the file itself says is not reproducible there (results that differ run to run cannot
    be bit-identical to another context's)."""
    from harness.core.contexts import get_context
    from harness.core.errors import UnknownContext
    from harness.execute.relations import RELATIONS

    out: list[str] = []
    family = getattr(subject, "family", None)
    for rel in c.invariant_under:
        r = RELATIONS.get(rel)
        if family is not None and r is not None and family not in r.families:
            out.append(f"{where}: invariant_under={list(c.invariant_under)!r}: relation {rel!r} makes no related "
                       f"case of a {family} subject ({c.subject}; it applies to {', '.join(r.families)}): the "
                       f"claim could never be checked")
    for ctx in c.identical_across:
        try:
            context = get_context(ctx)
        except UnknownContext:
            continue  # validate's own problem
        if not context.applies_to(c.device):
            out.append(f"{where}: identical_across={list(c.identical_across)!r}: context {ctx!r} never runs on "
                       f"device={c.device!r} (only on {', '.join(context.devices)}): the claim could never be checked")
            continue
        theirs = contracts.find(c.subject, c.device, ctx)
        if theirs is not None and not theirs.reproducible:
            out.append(f"{where}: identical_across={list(c.identical_across)!r}: context {ctx!r} is not "
                       f"reproducible for {c.subject} on {c.device} ({contracts.path}:{theirs.line} says "
                       f"reproducible = false): results that differ run to run there cannot be identical to this "
                       f"context's")
    return out


def _defects_never_apply(contracts: Any, subjects: Mapping[str, Any]) -> list[str]:
    """The ``[[known_defect]]`` declarations that could never match: no subjects, only oracles (they are the
    references, never judged against a declaration), a device none of its subjects runs on, or a declaration that
    repeats an earlier one (the second could never be the one that matches)."""
    out: list[str] = []
    seen: dict[tuple[Any, ...], int] = {}
    for d in contracts.known_defects:
        where = f"{contracts.path}:{d.line}"
        named = [subjects[n] for n in d.subjects if n != "*" and n in subjects]
        if not d.subjects:
            out.append(f"{where}: subjects=[] names no subject: the declaration would never apply")
        oracles = [s.name for s in named if getattr(s, "role", "subject") == "oracle"]
        if oracles:
            out.append(f"{where}: subjects={list(d.subjects)!r}: {', '.join(oracles)} "
                       f"{'is an oracle' if len(oracles) == 1 else 'are oracles'}: a reference is never judged "
                       f"against a known defect; name the subjects it judges")
        if d.device != "*" and named and "*" not in d.subjects and \
                not any(d.device in getattr(s, "devices", ()) for s in named):
            out.append(f"{where}: device={d.device!r}: none of subjects={list(d.subjects)!r} runs there (they run "
                       f"on {', '.join(sorted({k for s in named for k in getattr(s, 'devices', ())}))}): the "
                       f"declaration would never apply")
        key = (tuple(sorted(d.subjects)), d.device, tuple(sorted(d.tags)), d.error, d.phase, d.context,
               tuple(sorted(d.wrong)))
        if key in seen:
            out.append(f"{where}: declares the same defect as {contracts.path}:{seen[key]} (same subjects, device, "
                       f"tags, context and error or wrong tensors): remove one")
        else:
            seen[key] = d.line
    return out


def problems(contracts: Any, subjects: Mapping[str, Any], contexts: Any) -> list[str]:
    """Every problem of a loaded contracts file: :func:`harness.judge.contracts.validate`'s, then
    :func:`contradictions` (which needs the generators' tags: a layer above the judge)."""
    from harness.judge.contracts import validate

    return validate(contracts, subjects, contexts) + contradictions(contracts, subjects)


def refusal(problems: Sequence[str]) -> str:
    """The problems of a contracts file as one line (the first, and how many more ``contracts check`` lists)."""
    more = len(problems) - 1
    return problems[0] + (f" (and {more} more problem(s): python -m harness contracts check --contracts FILE "
                          f"lists them)" if more else "")
