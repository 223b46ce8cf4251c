"""harness.core.errors: a failed comparison is an AssertionError (pytest shows it as a failed assertion) and a
HarnessError (the command line says it in one line)."""

from __future__ import annotations

from harness.core.errors import ComparisonFailure, HarnessError


def test_comparison_failure_is_an_assertion_error():
    assert issubclass(ComparisonFailure, AssertionError)
    assert issubclass(ComparisonFailure, HarnessError)
