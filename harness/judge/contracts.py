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
    tolerance = { float32 = [1e-4, 1e-3] }   # optional (atol, rtol) per dtype; default compare.gradient_tolerance
    reason = "exists to be reproducible on GPU: one-hot GEMM instead of atomicAdd"

A bad-input line (it also applies to valid cases carrying the tag, e.g. ``ids:empty``)::

    [[bad_input]]
    tag = "bad:id_out_of_range_high"   # a tag the bad_inputs strategy puts on the case
    subjects = ["chainer.embed_id", "chainer.EmbedID"]
    device = "cpu"
    outcome = "raises"                 # raises | no_error | any
    errors = ["IndexError"]
    reason = "..."

A subject and device with no matching contract line is a "no contract" failure, never a pass.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core.errors import ContractError

__all__ = ["Contract", "BadInputRule", "Contracts", "load_contracts", "DEFAULT_CONTRACTS", "validate", "RELATION_NAMES",
           "ORACLE_RULE_NAMES"]

DEFAULT_CONTRACTS = Path(__file__).resolve().parents[2] / "contracts.toml"

_CONTRACT_KEYS = {"subject", "device", "context", "reproducible", "across_processes", "identical_across",
                  "oracle", "tolerance", "reason", "invariant_under", "oracle_rules"}

#: The invariance relations a contract may name in ``invariant_under`` (defined in harness.execute.relations).
RELATION_NAMES = ("alone", "subbatch", "order", "padding", "duplicate")
#: The looser oracle acceptances a contract may list in ``oracle_rules`` (harness.judge.tolerance).
ORACLE_RULE_NAMES = ("summation_bound", "normwise")
_BAD_KEYS = {"tag", "subjects", "device", "outcome", "errors", "reason", "context"}


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
    #: Relations under which results must be bit-identical (:data:`RELATION_NAMES`).
    invariant_under: tuple[str, ...] = ()
    #: The looser oracle rules that apply; None: both where no tolerance is stated, none where one is.
    oracle_rules: tuple[str, ...] | None = None

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
        if self.invariant_under:
            need.append("invariant under " + ", ".join(self.invariant_under))
        return (f"{self.subject} on {self.device} in {self.context}: "
                f"{'; '.join(need) or 'nothing required (record only)'} -- {self.reason}")

    def tolerance_for(self, dtype: str, n_terms: int = 1) -> tuple[float, float, str]:
        """(atol, rtol, source) for ``dtype``: the line's own table, else compare.gradient_tolerance."""
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

    def applies(self, subject: str, device_kind: str, tags: Iterable[str], context: str = "default") -> bool:
        return ((self.subjects == ("*",) or subject in self.subjects)
                and self.device in ("*", device_kind) and self.context in ("*", context)
                and self.tag in set(tags))


@dataclass(frozen=True)
class Contracts:
    """A parsed contracts file."""

    path: str
    contracts: tuple[Contract, ...]
    bad_inputs: tuple[BadInputRule, ...] = field(default_factory=tuple)

    def __repr__(self) -> str:
        return f"Contracts({self.path!r}, {len(self.contracts)} contracts, {len(self.bad_inputs)} bad-input rules)"

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
        # A rule written for this very context overrides the '*' rules of the same tag.
        exact_tags = {r.tag for r in hits if r.context == context}
        return [r for r in hits if r.context == context or r.tag not in exact_tags]


def _line_of(text: str, n: int, table: str) -> int:
    # Line number of the n-th [[table]] header, for messages.
    count = -1
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip() == f"[[{table}]]":
            count += 1
            if count == n:
                return i
    return 0


def load_contracts(path: str | os.PathLike[str] | None = None) -> Contracts:
    """Parse a contracts file (the shipped one by default); a malformed line raises ContractError."""
    p = Path(path) if path is not None else DEFAULT_CONTRACTS
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ContractError(f"contracts={str(p)!r} cannot be read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ContractError(f"contracts={str(p)!r} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(f"{p}: not valid TOML: {exc}") from exc
    if data.get("version", 1) != 1:
        raise ContractError(f"{p}: version={data.get('version')!r} is not supported (expected 1)")
    contracts = []
    for n, raw in enumerate(data.get("contract", [])):
        line = _line_of(text, n, "contract")
        where = f"{p}:{line}"
        unknown = set(raw) - _CONTRACT_KEYS
        if unknown:
            raise ContractError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        for key in ("subject", "device", "reason"):
            if not isinstance(raw.get(key), str) or not raw.get(key):
                raise ContractError(f"{where}: {key} must be a non-empty string (got {raw.get(key)!r})")
        if raw["device"] not in ("cpu", "gpu"):
            raise ContractError(f"{where}: device={raw['device']!r} must be 'cpu' or 'gpu'")
        oracle = raw.get("oracle", "within")
        if oracle not in ("within", "record"):
            raise ContractError(f"{where}: oracle={oracle!r} must be 'within' or 'record'")
        if not isinstance(raw.get("context", "*"), str) or not raw.get("context", "*"):
            raise ContractError(f"{where}: context={raw.get('context')!r} must be a context name or '*'")
        tol = {}
        table = raw.get("tolerance", {})
        if not isinstance(table, dict):
            raise ContractError(f"{where}: tolerance={table!r} must be a table such as {{ float32 = [1e-4, 1e-3] }}")
        for dt, pair in table.items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, (int, float))
                                                                      and not isinstance(v, bool) for v in pair)):
                raise ContractError(f"{where}: tolerance.{dt}={pair!r} must be [atol, rtol]")
            if not all(math.isfinite(v) and v >= 0 for v in pair):
                raise ContractError(f"{where}: tolerance.{dt}={pair!r} must be finite and >= 0")
            if dt not in ("float16", "float32", "float64"):
                raise ContractError(f"{where}: tolerance.{dt} is not a float dtype (float16, float32, float64)")
            tol[dt] = (float(pair[0]), float(pair[1]))
        for key in ("reproducible", "across_processes"):
            if not isinstance(raw.get(key, False), bool):
                raise ContractError(f"{where}: {key}={raw.get(key)!r} must be true or false")
        if raw.get("across_processes", False) and not raw.get("reproducible", False):
            raise ContractError(f"{where}: across_processes = true needs reproducible = true (bits that differ "
                                f"run to run cannot match across processes)")
        lists = {}
        for key, allowed in (("identical_across", None), ("invariant_under", RELATION_NAMES),
                             ("oracle_rules", ORACLE_RULE_NAMES)):
            value = raw.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ContractError(f"{where}: {key}={value!r} must be a list of names, e.g. [\"default\"]")
            bad = [v for v in value if allowed is not None and v not in allowed]
            if bad:
                raise ContractError(f"{where}: {key} names {bad[0]!r}, not one of {', '.join(allowed)}")
            lists[key] = tuple(value)
        contracts.append(Contract(
            subject=raw["subject"], device=raw["device"], context=raw.get("context", "*"),
            reproducible=raw.get("reproducible", False), across_processes=raw.get("across_processes", False),
            identical_across=lists["identical_across"], oracle=oracle, tolerance=tol,
            reason=raw["reason"], line=line, invariant_under=lists["invariant_under"],
            oracle_rules=lists["oracle_rules"] if "oracle_rules" in raw else None))
    rules = []
    for n, raw in enumerate(data.get("bad_input", [])):
        line = _line_of(text, n, "bad_input")
        where = f"{p}:{line}"
        unknown = set(raw) - _BAD_KEYS
        if unknown:
            raise ContractError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        outcome = raw.get("outcome", "raises")
        if outcome not in ("raises", "no_error", "any"):
            raise ContractError(f"{where}: outcome={outcome!r} must be raises, no_error or any")
        if outcome == "raises" and not raw.get("errors"):
            raise ContractError(f"{where}: outcome='raises' needs errors = [...]")
        for key in ("tag", "reason"):
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise ContractError(f"{where}: {key} must be a non-empty string")
        subjects = raw.get("subjects", ["*"])
        if not isinstance(subjects, list) or not all(isinstance(s, str) and s for s in subjects):
            raise ContractError(f"{where}: subjects={subjects!r} must be a list of subject names (or [\"*\"])")
        errors = raw.get("errors", [])
        if not isinstance(errors, list) or not all(isinstance(e, str) and e for e in errors):
            raise ContractError(f"{where}: errors={errors!r} must be a list of exception class names")
        for key in ("device", "context"):
            if not isinstance(raw.get(key, "*"), str):
                raise ContractError(f"{where}: {key}={raw.get(key)!r} must be a string")
        rules.append(BadInputRule(tag=raw["tag"], subjects=tuple(subjects), device=raw.get("device", "*"),
                                  outcome=outcome, errors=tuple(raw.get("errors", ())), reason=raw["reason"],
                                  context=raw.get("context", "*"), line=line))
    if not contracts:
        raise ContractError(f"{p}: holds no [[contract]] line: every subject x device x context needs one")
    by_tag: dict[tuple[str, str, str, str], set[str]] = {}
    for r in rules:
        for s in r.subjects:
            by_tag.setdefault((r.tag, s, r.device, r.context), set()).add(r.outcome)
    for (tag, s, dev, ctx), outcomes in by_tag.items():
        if {"raises", "no_error"} <= outcomes:
            line = next(r.line for r in rules if r.tag == tag and s in r.subjects and r.outcome == "no_error")
            raise ContractError(f"{p}:{line}: tag {tag!r} for {s} on {dev} in {ctx} has both a raises and a "
                                f"no_error rule: they cannot both hold")
    return Contracts(str(p), tuple(contracts), tuple(rules))


def validate(contracts: Contracts, subjects: Mapping[str, Any], contexts: Iterable[str]) -> list[str]:
    """One readable problem per bad line: unknown subjects, contexts, devices a subject lacks, duplicates."""
    from harness.core.contexts import get_context
    from harness.core.errors import UnknownContext

    problems = []
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
                problems.append(f"{where}: subject={s!r} is not registered")
        if ":" not in r.tag:
            problems.append(f"{where}: tag={r.tag!r} is not a case tag (kind:value, e.g. bad:float_ids or ids:empty)")
    problems += missing_lines(contracts, subjects)
    return problems


def missing_lines(contracts: Contracts, subjects: Mapping[str, Any]) -> list[str]:
    """Coverage: every registered subject (oracles aside: they are the reference) on every device kind it runs
    on, in every default context that applies there, must have a line; one problem per gap."""
    from harness.core.contexts import DEFAULT_CONTEXTS, get_context

    out = []
    for name, s in subjects.items():
        if getattr(s, "role", "subject") == "oracle":
            continue
        for kind in s.devices:
            for ctx in DEFAULT_CONTEXTS:
                if get_context(ctx).applies_to(kind) and contracts.find(name, kind, ctx) is None:
                    out.append(f"{contracts.path}: no line covers subject={name!r} device={kind!r} context={ctx!r} "
                               f"(add one, or a context = \"*\" line: a missing line is a failure, not a pass)")
    return out
