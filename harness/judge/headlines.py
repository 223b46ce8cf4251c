"""Headline findings: one bug, one headline.

A planted regression shows in every context a campaign runs (an oracle failure in default, blas1, blas2 and
debug), and a library defect in every context and relation that reaches it: each is a :class:`Finding` of its
own (its reproducer runs in that context), but a reader acts on one bug. A :class:`Headline` is the findings that
share a cause:

- the same subject family, device, finding kind, rule and tensor kind (an error: the same error type and phase),
  whatever the context or relation it showed in;
- or, where localizing named it, the same first diverging function; an error, the same library line that
  raised it (the LSTM links and the pipelines that call them fail at one line of Chainer).

It is titled by what it is (an error by its message, a difference by its kind and tensors) and says where it
holds (``in every CPU context: default, blas1, blas2, debug``), with each finding's details beneath.

Pure: findings in, headlines out (:func:`headlines`); the gate's summary and the page count and print these.

>>> from harness.core.records import Measure
>>> from harness.judge.finding_groups import group
>>> from harness.judge.findings import Origin
>>> ms = [Measure(kind="oracle", case_id="c", subject="s", device="cpu", context=c, tensor="hy", within=False,
...               verdict="broken", rule="oracle = within", error_ratio=2.0) for c in ("debug", "default")]
>>> [h.where for h in headlines(group(ms, None, Origin("/r")), {"cpu": ("default", "debug")})]
['in every CPU context: default, debug']
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from harness.core.contexts import context_order
from harness.judge.finding_groups import sort_findings
from harness.judge.findings import DOSSIER_LINES, Classification, Finding, FindingKind

__all__ = ["Headline", "headlines", "cause_key", "where_text", "device_label", "headline_of"]

def cause_key(f: Finding) -> tuple[str, ...]:
    """What findings of one cause share: the localized first diverging function where there is one, an
    error's type, phase and the library line that raised it, else the family, device, kind, rule (a relation's
    without the relation's name) and tensor kind, and an error's type and phase. A control's findings stay its
    own."""
    control = (f.subject,) if f.classification == Classification.CONTROL else ()
    if f.cause and not f.cause.startswith("not localized"):
        return ("cause", f.classification.value, f.family, f.device, f.cause, *control)
    if f.error and f.where:
        # one error raised at one library line is one bug, whatever subject family reached it
        return ("raised", f.classification.value, f.kind.value, f.device, f.error.split(":", 1)[0], f.where, *control)
    rule = f.kind.value if f.relation else f.rule
    if f.kind == FindingKind.CONTEXT:
        rule = f.kind.value  # its rule names the other context: every pair of contexts is the same story
    what = f.error.split(":", 1)[0] if f.error else ""
    return (f.classification.value, f.kind.value, f.family or f.subject, f.device, rule, f.tensor_kind, what, *control)


def device_label(device: str) -> str:
    return "CPU" if device == "cpu" else device


def _contexts(f: Finding) -> bool:
    """Whether a paired finding's pair is two contexts (a cross-context difference, a trajectory), not devices."""
    return f.kind.replay == "contexts"


def where_text(findings: Sequence[Finding], contexts: Sequence[str] = ()) -> str:
    """Where a group holds: its relations (``under 'alone' and 'permuted'``), or its contexts, ``every`` one
    where they cover ``contexts`` (every context the campaign ran on that device), its pairs for differences
    between contexts or devices."""
    f = findings[0]
    dev = device_label(f.device)
    rels = list(dict.fromkeys(x.relation for x in findings if x.relation))
    if rels:
        return "under " + " and ".join(f"'{r}'" for r in rels)
    if f.kind.paired:
        pairs = list(dict.fromkeys(f"{x.other} vs {x.context if _contexts(x) else x.device}" for x in findings))
        between = f"between {dev} contexts: " if _contexts(f) else "between devices: "
        return between + ", ".join(pairs)
    seen = context_order(c for x in findings for c in (x.contexts or (x.context,)))
    every = context_order(contexts)
    if len(every) > 1 and set(every) <= set(seen):
        return f"in every {dev} context: {', '.join(seen)}"
    if len(seen) == 1:
        return f"in {dev} context {seen[0]}" + (f" (of {len(every)})" if len(every) > 1 else "")
    return f"in {len(seen)}" + (f" of {len(every)}" if len(every) > len(seen) else "") + \
        f" {dev} contexts: {', '.join(seen)}"


def _detail(f: Finding) -> str:
    """One line for one finding beneath its headline: where, how much, and its own reproducer."""
    where = f"under '{f.relation}'" if f.relation else ", ".join(f.contexts or (f.context,))
    if f.kind.paired:
        where = f"{f.other} vs {f.context if _contexts(f) else f.device}"
    m = f.worst
    worst = ""
    if m.kind == "oracle" and m.error_ratio is not None:
        worst = f", error/allowed {m.error_ratio:.3g} in {m.tensor}"
    elif m.max_ulp is not None and m.tensor:
        worst = f", {'NaN vs non-NaN' if m.max_ulp >= 2 ** 63 else m.max_ulp} ULP in {m.tensor}"
    return f"{where}: {f.size_text()}{worst}" + (f"; reproduce: {f.replay()}" if f.replay() else "")


@dataclass(frozen=True)
class Headline:
    """The findings of one cause, most severe first; the first (``lead``) is the one shown in full."""

    id: str
    findings: tuple[Finding, ...]
    where: str

    @property
    def lead(self) -> Finding:
        return self.findings[0]

    @property
    def classification(self) -> Classification:
        return self.lead.classification

    @property
    def fails(self) -> bool:
        return any(f.fails for f in self.findings)

    @property
    def subjects(self) -> tuple[str, ...]:
        lead = self.lead.subject
        return (lead, *sorted({s for f in self.findings for s in f.subjects} - {lead}))

    def what(self) -> str:
        """What the bug is: an error's message (and the library line it came from), else the finding kind and
        its tensors, and where localizing found it starts."""
        f = self.lead
        if f.error:
            return f.error + (f" (raised in {f.where})" if f.where else "")
        text = str(f.kind) + (f" of {f.tensor_kind}" if f.tensor_kind else "")
        if not f.kind.paired and not f.relation and f.rule:
            text += f" ({f.rule})"  # two rules of one kind (a baseline's digest, its oracle error) read apart
        if f.cause and not f.cause.startswith("not localized"):
            text += f", starting at {f.cause}"
        return text

    def title(self) -> str:
        """One line: class, subjects, device, what it is, where it holds."""
        subjects = self.subjects
        also = f" (and {', '.join(subjects[1:])})" if len(subjects) > 1 else ""
        return f"[{self.classification}] {subjects[0]}{also} [{self.lead.device}]: {self.what()} -- {self.where}"

    def details(self) -> list[str]:
        """One line per finding beneath the headline."""
        return [_detail(f) for f in self.findings]

    def dossier(self) -> str:
        """The title, the lead finding's dossier (without its own first line), and every other finding in one
        line each; at most :data:`DOSSIER_LINES` lines."""
        lead = self.lead.dossier().splitlines()[1:]
        lines = [self.title(), f"Rule: {self.lead.rule}", *lead]
        rest = self.details()[1:]
        if rest:
            room = max(DOSSIER_LINES - len(lines) - 2, 1)
            lines.append(f"Also ({len(rest)} more finding(s) of this cause):")
            lines += [f"  {d}" for d in rest[:room]]
            if len(rest) > room:
                lines.append(f"  ... and {len(rest) - room} more in findings.csv (headline {self.id})")
        return "\n".join(lines[:DOSSIER_LINES])


def headlines(findings: Iterable[Finding], contexts: Mapping[str, Sequence[str]] | None = None) -> list[Headline]:
    """The findings grouped by cause (:func:`cause_key`), in the order of their most severe finding.
    ``contexts``: every context the campaign ran, by device (what ``in every CPU context`` means)."""
    groups: dict[tuple[str, ...], list[Finding]] = {}
    for f in sort_findings(findings):
        groups.setdefault(cause_key(f), []).append(f)
    out = []
    for key, fs in groups.items():
        hid = hashlib.sha256("\x1f".join(key).encode()).hexdigest()[:10]
        out.append(Headline(hid, tuple(fs), where_text(fs, (contexts or {}).get(fs[0].device, ()))))
    return out


def headline_of(findings: Iterable[Finding], contexts: Mapping[str, Sequence[str]] | None = None
                ) -> dict[str, str]:
    """Each finding's headline id, by finding id (the ``headline`` column of findings.csv)."""
    return {f.id: h.id for h in headlines(findings, contexts) for f in h.findings}


def contexts_by_device(pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """``{device: contexts}`` from (device, context) pairs a campaign ran, in the registry's order."""
    out: dict[str, list[str]] = {}
    for device, context in pairs:
        out.setdefault(device, []).append(context)
    return {d: context_order(cs) for d, cs in out.items()}


__all__ += ["contexts_by_device"]
