"""Determinism contracts: what each subject x device x context must guarantee, read from TOML.

A contract line::

    [[contract]]
    subject = "espnet.embed_id"
    device = "gpu"                 # a device kind: cpu or gpu
    context = "*"                  # a context name, or * for every context without its own line
    reproducible = true            # bit-identical run to run inside one process
    across_processes = true        # ... and in fresh worker processes
    identical_across = ["default"] # bit-identical to these contexts' results
    oracle = "within"              # gradient error within tolerance ("within", "record")
    tolerance = { float32 = [1e-4, 1e-3] }   # optional (atol, rtol) per dtype; default tolerance.gradient_tolerance
    # optional looser rules; default all, none with tolerance
    oracle_rules = ["summation_bound", "normwise", "amplification"]
    invariant_under = ["order"]    # optional: relations (alone, subbatch, order, padding, duplicate) that hold
    reason = "exists to be reproducible on GPU: one-hot GEMM instead of atomicAdd"

A bad-input line (it also applies to valid cases carrying the tag)::

    [[bad_input]]
    tag = "bad:id_out_of_range_high"   # a tag the bad_inputs strategy puts on the case
    subjects = ["chainer.embed_id", "chainer.EmbedID"]
    device = "cpu"
    outcome = "raises"                 # raises | no_error | any
    errors = ["IndexError"]
    phase = "forward"                  # raises only: forward | backward | double-backward
    reason = "..."

``raises``: one of ``errors`` in ``phase`` (an error that moved to a later phase is a violation: the earlier
phase returned numbers for an input it must refuse). ``no_error``: the input has documented semantics; its
values are compared with the oracle like a valid case's. ``any``: no semantics is documented; whatever
happens (error type and phase, or the values' digests) must be the same across repeats, processes, contexts
and devices.

A known library defect (a crash inside the library, on a valid input or on a bad one whose rule documents no
such error; or values the library gets wrong, ``wrong = ["grad.W"]`` instead of ``error`` and ``phase``)::

    [[known_defect]]
    subjects = ["chainer.embed_id"]
    device = "cpu"                     # cpu | gpu | *
    tags = ["ids:empty"]               # every tag must be on the case
    error = "ValueError"
    phase = "backward"
    reason = "EmbedIDGrad's CPU loop reshapes an empty array"
    reference = "https://github.com/chainer/chainer/... or a description of where"

An error that matches one is the verdict "known defect", never "expected error"; any other error of a valid
input stays "error". A ``wrong`` declaration turns a named tensor's error beyond the oracle's tolerance into
"known defect" (its measured error kept): its bits are still judged run to run, across processes and contexts.

A subject and device with no matching contract line is a "no contract" failure, never a pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core import schemas
from harness.core.argcheck import SHIPPED_CONTRACTS, readable_file
from harness.core.errors import ContractError, InvalidArgument
from harness.core.input_parsing import InputProblem, parse_toml
from harness.core.schema_check import first_problem
from harness.core.vocabulary import phase_name

__all__ = ["Contract", "BadInputRule", "KnownDefect", "Contracts", "load_contracts", "DEFAULT_CONTRACTS", "validate",
           "ORACLE_RULES"]

DEFAULT_CONTRACTS = Path(SHIPPED_CONTRACTS)

#: The looser oracle rules a contract may opt into (``oracle_rules``); the default for a line
#: without ``tolerance`` is all of them, for a line with ``tolerance`` none.
ORACLE_RULES = schemas.ORACLE_RULES

# The schema of the whole file is data in harness.core.schemas (CONTRACTS: CONTRACT_FIELDS, BAD_INPUT_FIELDS,
# KNOWN_DEFECT_FIELDS, and the rules between keys); this module converts what it accepted.


@dataclass(frozen=True)
class Contract:
    """One contract line."""

    subject: str
    device: str
    context: str
    reproducible: bool
    across_processes: bool
    identical_across: tuple[str, ...]
    oracle: str
    tolerance: Mapping[str, tuple[float, float]]
    reason: str
    line: int = 0
    #: Invariance relations (names from :data:`~harness.core.vocabulary.RELATIONS`) this line claims hold
    #: bit-identically.
    invariant_under: tuple[str, ...] = ()
    #: Looser oracle rules this line allows (names from :data:`ORACLE_RULES`); empty means the
    #: stated (or default) tolerance is enforced as it is.
    oracle_rules: tuple[str, ...] = ORACLE_RULES
    #: The contracts file this line comes from (its name, for "FILE line N" in dossiers).
    source: str = "contracts.toml"

    def describe(self) -> str:
        need = []
        if self.reproducible:
            need.append("bit-identical run to run")
        if self.across_processes:
            need.append("across processes")
        if self.identical_across:
            need.append("identical to " + ", ".join(self.identical_across))
        if self.oracle == "within":
            need.append("gradient error within tolerance")
        return (f"{self.subject} on {self.device} in {self.context}: "
                f"{'; '.join(need) or 'nothing required (record only)'} -- {self.reason}")

    def tolerance_for(self, dtype: str, n_terms: int = 1) -> tuple[float, float, str]:
        """(atol, rtol, source) for ``dtype``: the line's own table, else
        :func:`harness.judge.tolerance.gradient_tolerance`."""
        if dtype in self.tolerance:
            atol, rtol = self.tolerance[dtype]
            return float(atol), float(rtol), f"contracts.toml line {self.line}"
        from harness.judge.tolerance import gradient_tolerance

        return gradient_tolerance(dtype, n_terms)


@dataclass(frozen=True)
class BadInputRule:
    """What a bad input of one kind must do for some subjects."""

    tag: str
    subjects: tuple[str, ...]
    device: str
    outcome: str
    errors: tuple[str, ...]
    reason: str
    context: str = "*"
    line: int = 0
    source: str = "contracts.toml"
    #: Where a ``raises`` error must be raised (one of :data:`~harness.core.vocabulary.COMPUTE_PHASES`); empty for the
    #: other outcomes.
    phase: str = ""

    def applies(self, subject: str, device_kind: str, tags: Iterable[str], context: str = "default") -> bool:
        return ((self.subjects == ("*",) or subject in self.subjects)
                and self.device in ("*", device_kind) and self.context in ("*", context)
                and self.tag in set(tags))


@dataclass(frozen=True)
class KnownDefect:
    """A library defect the contracts file declares for some subjects on inputs with some tags: an error
    (``error`` raised in ``phase``), or values beyond the oracle's tolerance in the tensors ``wrong`` names."""

    subjects: tuple[str, ...]
    device: str
    tags: tuple[str, ...]
    error: str
    phase: str
    reason: str
    reference: str
    context: str = "*"
    line: int = 0
    source: str = "contracts.toml"
    wrong: tuple[str, ...] = ()

    def applies(self, subject: str, device_kind: str, tags: Iterable[str], context: str = "default") -> bool:
        """Whether the declaration covers this subject, device kind, case (all its ``tags``) and context."""
        return ((self.subjects == ("*",) or subject in self.subjects)
                and self.device in ("*", device_kind) and self.context in ("*", context)
                and set(self.tags) <= set(tags))

    def matches(self, error_type: str, phase: str) -> bool:
        return bool(self.error) and error_type == self.error and phase == self.phase

    def covers_values(self, tensor: str) -> bool:
        """Whether the declaration says ``tensor``'s values are wrong (beyond the oracle's tolerance)."""
        return tensor in self.wrong

    @property
    def what(self) -> str:
        """The defect in a few words: ``ValueError in backward`` or ``grad.W beyond the oracle's tolerance``."""
        if self.wrong:
            return f"{', '.join(self.wrong)} beyond the oracle's tolerance"
        return f"{self.error} in {self.phase}"

    @property
    def rule(self) -> str:
        """A measure's rule where this declaration decided its verdict: ``known defect (ValueError in backward)``."""
        return f"known defect ({self.what})"

    @property
    def cited(self) -> str:
        """A measure's contract text: where the declaration is and why (``contracts.toml line 12: ...``)."""
        return f"{self.source} line {self.line}: {self.reason}"

    def describe(self) -> str:
        return (f"known defect: {self.what} -- {self.reason} (upstream: {self.reference}; "
                f"{self.source} line {self.line})")


@dataclass(frozen=True)
class Contracts:
    """A parsed contracts file."""

    path: str
    contracts: tuple[Contract, ...]
    bad_inputs: tuple[BadInputRule, ...] = field(default_factory=tuple)
    known_defects: tuple[KnownDefect, ...] = field(default_factory=tuple)

    def __repr__(self) -> str:
        return (f"Contracts({self.path!r}, {len(self.contracts)} contracts, {len(self.bad_inputs)} bad-input rules, "
                f"{len(self.known_defects)} known defects)")

    def known_defects_for(self, subject: str, device_kind: str, tags: Iterable[str],
                          context: str = "default") -> list[KnownDefect]:
        """The known defects declared for this subject, device kind, case tags and context (any error)."""
        tags = list(tags)
        return [d for d in self.known_defects if d.applies(subject, device_kind, tags, context)]

    def known_defect_for(self, subject: str, device_kind: str, tags: Iterable[str], error_type: str, phase: str,
                         context: str = "default") -> KnownDefect | None:
        """The declaration an error (``error_type`` raised in ``phase``) matches, else None."""
        return next((d for d in self.known_defects_for(subject, device_kind, tags, context)
                     if d.matches(error_type, phase)), None)

    def find(self, subject: str, device_kind: str, context: str) -> Contract | None:
        """The line for exactly this context, else the subject/device's ``*`` line, else None."""
        exact = [c for c in self.contracts if c.subject == subject and c.device == device_kind and c.context == context]
        if exact:
            return exact[0]
        wild = [c for c in self.contracts if c.subject == subject and c.device == device_kind and c.context == "*"]
        return wild[0] if wild else None

    def bad_rules(self, subject: str, device_kind: str, tags: Iterable[str],
                  context: str = "default") -> list[BadInputRule]:
        tags = list(tags)
        hits = [r for r in self.bad_inputs if r.applies(subject, device_kind, tags, context)]
        # A rule written for this very context overrides the '*' rules of the same tag; then a rule that names
        # this subject overrides the subjects = ["*"] rules of the same tag.
        exact_tags = {r.tag for r in hits if r.context == context}
        hits = [r for r in hits if r.context == context or r.tag not in exact_tags]
        named_tags = {r.tag for r in hits if subject in r.subjects}
        return [r for r in hits if subject in r.subjects or r.tag not in named_tags]


def _key_line(lines: list[str], header: int, key: str) -> int:
    """The line of ``key = ...`` inside the table whose header is at line ``header`` (else the header)."""
    for i in range(header, len(lines)):  # lines[header] is the line after the header
        stripped = lines[i].strip()
        if stripped.startswith("["):
            break
        if "=" in stripped and stripped.split("=", 1)[0].strip().strip('"') == key:
            return i + 1
    return header


def _line_of(lines: list[str], path: list[Any]) -> int:
    """The line of the key a JSON path into the file names: ``['contract', 3, 'tolerance', ...]`` is the
    ``tolerance =`` line of the fourth ``[[contract]]`` (its header where the key is absent); 1 for the top."""
    if len(path) >= 2 and isinstance(path[1], int):
        heads = _headers(lines, str(path[0]))
        header = heads[path[1]] if path[1] < len(heads) else 0
        return _key_line(lines, header, str(path[2])) if len(path) >= 3 and header else header or 1
    if path:
        return _key_line(lines, 0, str(path[0])) or 1
    return 1


def _tuple(v: Any) -> tuple[str, ...]:
    return tuple(v)


def _phase(v: str) -> str:
    return phase_name(v)


def _headers(lines: list[str], table: str) -> list[int]:
    return [i for i, line in enumerate(lines, 1) if line.strip().split("#", 1)[0].strip() == f"[[{table}]]"]


def load_contracts(path: str | os.PathLike[str] | None = None) -> Contracts:
    """Parse and schema-check a contracts file (the shipped one by default).

    Every problem is a one-line :class:`ContractError` with file:line: not UTF-8, not TOML, empty,
    a key of the wrong type (a string where a list is meant), a non-finite or negative tolerance,
    ``across_processes`` without ``reproducible``, a tag both ``raises`` and ``no_error``.
    Coverage (every subject x device x context has a line) is :func:`validate`'s job.
    """
    p = Path(path) if path is not None else DEFAULT_CONTRACTS
    try:  # a directory, a FIFO or /dev/zero is refused before anything is read
        readable_file("contracts", str(p))
    except InvalidArgument as exc:
        raise ContractError(str(exc)) from None
    try:
        raw_bytes = p.read_bytes()
    except OSError as exc:
        raise ContractError(f"contracts={str(p)!r} cannot be read: {exc.strerror or exc}") from exc
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw_bytes[:exc.start].count(b"\n") + 1
        raise ContractError(f"{p}:{line}: not UTF-8 (byte {raw_bytes[exc.start]:#04x})") from None
    try:
        data = parse_toml(text, str(p))
    except InputProblem as exc:
        raise ContractError(str(exc)) from None
    lines = text.splitlines()
    found = first_problem(data, schemas.CONTRACTS)
    if found is not None:  # the whole file against one schema: the first bad key, at its own line
        where, message = found
        if where == [] and "'contract'" in message:
            message = "holds no [[contract]] line: every subject x device x context needs one"
        raise ContractError(f"{p}:{_line_of(lines, where)}: {message}")
    contracts = []
    heads = _headers(lines, "contract")
    for n, v in enumerate(data["contract"]):
        line = heads[n] if n < len(heads) else 0
        tol = {dt: (float(a), float(r)) for dt, (a, r) in v.get("tolerance", {}).items()}
        # A stated tolerance is what is enforced unless the line opts into looser rules itself.
        rules = _tuple(v.get("oracle_rules", () if tol else ORACLE_RULES))
        contracts.append(Contract(
            subject=v["subject"], device=v["device"], context=v.get("context", "*"),
            reproducible=v.get("reproducible", False), across_processes=v.get("across_processes", False),
            identical_across=_tuple(v.get("identical_across", ())), oracle=v.get("oracle", "within"), tolerance=tol,
            reason=v["reason"], line=line, invariant_under=_tuple(v.get("invariant_under", ())), oracle_rules=rules,
            source=p.name))
    rules_out = []
    heads = _headers(lines, "bad_input")
    for n, v in enumerate(data.get("bad_input", [])):
        line = heads[n] if n < len(heads) else 0
        # Where the error is raised is part of a raises rule (the schema requires it): a forward that returns
        # numbers for an input it must refuse, with the error moved to the backward, is the corruption it is for.
        rules_out.append(BadInputRule(tag=v["tag"], subjects=_tuple(v.get("subjects", ("*",))),
                                      device=v.get("device", "*"), outcome=v.get("outcome", "raises"),
                                      errors=_tuple(v.get("errors", ())), reason=v["reason"],
                                      context=v.get("context", "*"), line=line, source=p.name,
                                      phase=_phase(v.get("phase", ""))))
    _check_rule_conflicts(p, rules_out)
    defects = []
    heads = _headers(lines, "known_defect")
    for n, v in enumerate(data.get("known_defect", [])):
        line = heads[n] if n < len(heads) else 0
        defects.append(KnownDefect(subjects=_tuple(v["subjects"]), device=v.get("device", "*"), tags=_tuple(v["tags"]),
                                   error=v.get("error", ""), phase=_phase(v.get("phase", "")), reason=v["reason"],
                                   reference=v["reference"], context=v.get("context", "*"), line=line, source=p.name,
                                   wrong=_tuple(v.get("wrong", ()))))
    return Contracts(str(p), tuple(contracts), tuple(rules_out), tuple(defects))


def _check_rule_conflicts(p: Path, rules: list[BadInputRule]) -> None:
    """Refuse a tag that must both raise and not raise for the same subject, device and context."""
    def overlap(a: tuple[str, ...] | str, b: tuple[str, ...] | str) -> bool:
        a = (a,) if isinstance(a, str) else a
        b = (b,) if isinstance(b, str) else b
        return "*" in a or "*" in b or bool(set(a) & set(b))

    for i, r in enumerate(rules):
        for q in rules[:i]:
            if (r.tag == q.tag and {r.outcome, q.outcome} == {"raises", "no_error"}
                    and overlap(r.subjects, q.subjects) and overlap(r.device, q.device)
                    and r.context == q.context):
                raise ContractError(f"{p}:{r.line}: tag={r.tag!r} is outcome={r.outcome!r} here and "
                                    f"outcome={q.outcome!r} at {p}:{q.line} for the same subjects/device/context")


def validate(contracts: Contracts, subjects: Mapping[str, Any], contexts: Iterable[str],
             coverage_contexts: Iterable[str] | None = None) -> list[str]:
    """One readable problem (file:line) per bad line, and one per missing line.

    Bad lines: unknown subjects, contexts, devices a subject lacks, duplicates. Coverage: every
    registered subject whose role is not ``oracle`` x each device kind it runs on x each context
    of ``coverage_contexts`` (default :data:`harness.core.contexts.DEFAULT_CONTEXTS`) that applies
    to that device kind must find a line (:meth:`Contracts.find`), else the gate would report
    "no contract" for it.
    """
    from harness.core.contexts import DEFAULT_CONTEXTS, get_context
    from harness.core.errors import UnknownContext

    problems = []
    for name in sorted(subjects):
        s = subjects[name]
        if getattr(s, "role", "subject") == "oracle":
            continue
        for kind in getattr(s, "devices", ()):
            for ctx in (DEFAULT_CONTEXTS if coverage_contexts is None else coverage_contexts):
                try:
                    context = get_context(ctx)
                except UnknownContext:
                    continue
                if kind not in getattr(context, "devices", (kind,)):
                    continue
                if contracts.find(name, kind, ctx) is None:
                    problems.append(f"{contracts.path}:1: no [[contract]] line for subject={name!r} "
                                    f"device={kind!r} context={ctx!r} (add one, or a context = \"*\" line)")
    seen: dict[tuple[str, str, str], int] = {}
    known_contexts = set(contexts)
    for c in contracts.contracts:
        where = f"{contracts.path}:{c.line}"
        if c.subject not in subjects:
            problems.append(f"{where}: subject={c.subject!r} is not registered")
            continue
        if c.device not in subjects[c.subject].devices:
            problems.append(f"{where}: subject {c.subject} does not run on device={c.device!r}")
        for ctx in ((c.context,) if c.context != "*" else ()) + c.identical_across:
            if ctx not in known_contexts:
                try:
                    get_context(ctx)
                except UnknownContext:
                    problems.append(f"{where}: context={ctx!r} is not a registered context")
        key = (c.subject, c.device, c.context)
        if key in seen:
            problems.append(f"{where}: duplicates the line at {contracts.path}:{seen[key]}")
        seen[key] = c.line
    for r in contracts.bad_inputs:
        where = f"{contracts.path}:{r.line}"
        for s in r.subjects:
            if s != "*" and s not in subjects:
                problems.append(f"{where}: subjects={list(r.subjects)!r}: subject={s!r} is not registered")
        if ":" not in r.tag:
            problems.append(f"{where}: tag={r.tag!r} is not a case tag (kind:value, e.g. bad:float_ids or ids:empty)")
    for d in contracts.known_defects:
        where = f"{contracts.path}:{d.line}"
        for s in d.subjects:
            if s != "*" and s not in subjects:
                problems.append(f"{where}: subjects={list(d.subjects)!r}: subject={s!r} is not registered")
        for t in d.tags:
            if ":" not in t:
                problems.append(f"{where}: tags={list(d.tags)!r}: tag={t!r} is not a case tag (kind:value, e.g. "
                                f"ids:empty)")
        if d.context != "*" and d.context not in known_contexts:
            try:
                get_context(d.context)
            except UnknownContext:
                problems.append(f"{where}: context={d.context!r} is not a registered context")
        for r in contracts.bad_inputs:
            # A defect is never an expected error: a raises rule that names the same error in the same phase
            # for the same inputs would file the crash as documented behaviour.
            if (r.outcome == "raises" and r.tag in d.tags and d.error and d.error in r.errors and r.phase == d.phase
                    and (r.subjects == ("*",) or d.subjects == ("*",) or set(r.subjects) & set(d.subjects))):
                problems.append(f"{where}: known defect {d.error} in {d.phase} on {', '.join(d.tags)} is also "
                                f"an expected error at {contracts.path}:{r.line}: a defect is never expected")
    return problems
