"""``harness contracts check``: validate a contracts file against the registered subjects and contexts."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from harness.verbs.common import load_plugins, reproducer_option

__all__ = ["ContractsCheckOptions", "check"]


@dataclass(frozen=True)
class ContractsCheckOptions:
    contracts: str | None = reproducer_option("--contracts", "contracts", default=None)  # None: the shipped one
    plugins: tuple[str, ...] = reproducer_option("--subject-plugin", "contracts", default=())


def check(opts: ContractsCheckOptions) -> int:
    """0 when valid, 1 with one line per bad line (on stderr)."""
    from harness.core.contexts import CONTEXTS
    from harness.judge.contracts import load_contracts
    from harness.outputs.contract_checks import problems as contract_problems
    from harness.subjects.registry import SUBJECTS

    load_plugins(opts.plugins)
    contracts = load_contracts(opts.contracts)
    problems = contract_problems(contracts, SUBJECTS, CONTEXTS)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"contracts check: {len(problems)} problem(s) in {contracts.path}", file=sys.stderr)
        return 1
    print(f"contracts check: {contracts.path}: {len(contracts.contracts)} contracts, "
          f"{len(contracts.bad_inputs)} bad-input rules, all valid")
    return 0
