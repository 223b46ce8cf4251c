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

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core.errors import ContractError

__all__ = ["Contract", "BadInputRule", "Contracts", "load_contracts", "DEFAULT_CONTRACTS", "validate"]

DEFAULT_CONTRACTS = Path(__file__).resolve().parents[2] / "contracts.toml"

_CONTRACT_KEYS = {"subject", "device", "context", "reproducible", "across_processes", "identical_across",
                  "oracle", "tolerance", "reason"}
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
        tol = {}
        for dt, pair in raw.get("tolerance", {}).items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair)):
                raise ContractError(f"{where}: tolerance.{dt}={pair!r} must be [atol, rtol]")
            tol[dt] = (float(pair[0]), float(pair[1]))
        for key in ("reproducible", "across_processes"):
            if not isinstance(raw.get(key, False), bool):
                raise ContractError(f"{where}: {key}={raw.get(key)!r} must be true or false")
        contracts.append(Contract(
            subject=raw["subject"], device=raw["device"], context=raw.get("context", "*"),
            reproducible=raw.get("reproducible", False), across_processes=raw.get("across_processes", False),
            identical_across=tuple(raw.get("identical_across", ())), oracle=oracle, tolerance=tol,
            reason=raw["reason"], line=line))
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
        rules.append(BadInputRule(tag=raw["tag"], subjects=tuple(subjects), device=raw.get("device", "*"),
                                  outcome=outcome, errors=tuple(raw.get("errors", ())), reason=raw["reason"],
                                  context=raw.get("context", "*"), line=line))
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
    return problems
