"""The pytest plugin: options, header, device parametrization, and the in-process contract checks.

Loaded by the project's ``conftest.py`` (``pytest_plugins = ("harness.pytest_plugin",)``); a team that
puts the gate in its own CI loads it the same way.

- ``--device cpu|gpu|all`` (default all): which devices the ``device`` argument of a test takes.
  Each becomes its own test id (``[cpu]``, ``[gpu:0]``); GPU ones carry the ``gpu`` mark and skip
  with a short reason where there is no CUDA device.
- ``--contracts FILE``: the contracts file (default: the shipped ``contracts.toml``).
- ``--baseline DIR``: a stored report directory for the baseline suite.
- ``--gate-repeats R``: in-process repetitions per example (default 3).
- The header prints the Hypothesis profile, the seed, the devices and the contract file.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Sequence

import pytest

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.judge.contracts import Contracts, load_contracts
from harness.core.devices import Device, parse_devices
from harness.outputs.gate import Violation, assert_no_violations, check_across, check_bad_input, check_oracle, \
    check_repeats, no_contract
from harness.subjects.base import RunResult, execute
from harness.subjects.registry import ORACLE_FOR_FAMILY, get_subject

__all__ = ["run_repeats", "contract_violations", "bad_input_violations", "contract_property", "assert_contract",
           "GateState"]


class GateState:
    """What the plugin knows for this session (set in pytest_configure)."""

    contracts: Contracts | None = None
    devices: list[Device] = []
    repeats: int = 3
    profile: str = "dev"
    baseline: str | None = None


# ---- options and header ----------------------------------------------------------------------------
def pytest_addoption(parser: Any) -> None:
    g = parser.getgroup("harness", "determinism harness")
    g.addoption("--device", default="all", help="devices to instantiate device-generic tests on: cpu, gpu, all")
    g.addoption("--contracts", default=None, help="contracts TOML (default: the shipped contracts.toml)")
    g.addoption("--baseline", default=None, metavar="DIR", help="a stored report directory to compare against")
    g.addoption("--gate-repeats", type=int, default=3, help="in-process repetitions per example (default 3)")


def _gpu_count_without_cupy() -> int:
    """CUDA devices as nvidia-smi lists them (0 where it is absent): asked before CuPy initializes."""
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def pin_xdist_worker_gpu(environ: Any = os.environ, count: int | None = None) -> str | None:
    """Under pytest-xdist (``-n auto``) give worker ``gwK`` GPU ``K mod n`` alone, through
    ``CUDA_VISIBLE_DEVICES``, so workers do not share a device. Returns what it set, or None
    where it changed nothing (not a worker, one or no GPU, or CUDA_VISIBLE_DEVICES already set)."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or "CUDA_VISIBLE_DEVICES" in environ:
        return None
    n = _gpu_count_without_cupy() if count is None else count
    if n < 2:
        return None
    environ["CUDA_VISIBLE_DEVICES"] = str(int(worker[2:]) % n)
    return environ["CUDA_VISIBLE_DEVICES"]


def pytest_configure(config: Any) -> None:
    from harness.core.errors import InvalidArgument

    pin_xdist_worker_gpu()
    from harness.generate.profiles import load_profile

    explicit = config.getoption("hypothesis_profile", default=None)
    try:
        GateState.profile = load_profile(explicit)
    except InvalidArgument as exc:
        raise pytest.UsageError(str(exc)) from None
    choice = config.getoption("device")
    if choice not in ("cpu", "gpu", "all") and not choice.startswith("gpu:"):
        raise pytest.UsageError(f"--device={choice!r} is not cpu, gpu, gpu:N or all")
    GateState.devices = parse_devices(choice)
    GateState.contracts = load_contracts(config.getoption("contracts"))
    GateState.repeats = max(1, int(config.getoption("gate_repeats")))
    GateState.baseline = config.getoption("baseline")


def pytest_report_header(config: Any) -> list[str]:
    from hypothesis import settings

    s = settings()
    seed = config.getoption("hypothesis_seed", default=None)
    seed_text = "derandomized" if s.derandomize else (str(seed) if seed is not None else "random (printed on failure)")
    devs = []
    for d in GateState.devices:
        ok, reason = d.availability()
        devs.append(d.id if ok else f"{d.id} (skipped: {reason})")
    c = GateState.contracts
    return [f"harness: profile={GateState.profile} (max_examples={s.max_examples}) seed={seed_text} "
            f"repeats={GateState.repeats}",
            f"harness: devices={', '.join(devs)}",
            f"harness: contracts={c.path if c else '?'}"
            + (f" baseline={GateState.baseline}" if GateState.baseline else "")]


def pytest_generate_tests(metafunc: Any) -> None:
    """Instantiate every test that takes ``device`` once per selected device."""
    if "device" not in metafunc.fixturenames:
        return
    params = []
    for d in GateState.devices:
        ok, reason = d.availability()
        marks = [pytest.mark.gpu] if d.is_gpu else []
        if not ok:
            marks.append(pytest.mark.skip(reason=reason))
        params.append(pytest.param(d, id=d.id, marks=marks))
    metafunc.parametrize("device", params)


@pytest.fixture(scope="session")
def contracts() -> Contracts:
    """The contracts file in use."""
    assert GateState.contracts is not None
    return GateState.contracts


# ---- in-process checks -------------------------------------------------------------------------------------
def run_repeats(subject: str, case: Case, device: Device, context: str = "default",
                repeats: int | None = None) -> list[RunResult]:
    """Run a subject R times in this process."""
    subj, ctx = get_subject(subject), get_context(context)
    return [execute(subj, case, device, ctx) for _ in range(repeats or GateState.repeats)]


_ORACLE_CACHE: dict[str, dict[str, Any]] = {}


def _oracle(case: Case) -> dict[str, Any] | None:
    name = ORACLE_FOR_FAMILY.get(case.family)
    if name is None or not get_subject(name).applies_to(case):
        return None
    if case.id not in _ORACLE_CACHE:
        from harness.core.devices import CPU

        r = execute(get_subject(name), case, CPU, get_context("default"))
        _ORACLE_CACHE[case.id] = r.arrays if r.ok else {}
        if len(_ORACLE_CACHE) > 256:
            _ORACLE_CACHE.pop(next(iter(_ORACLE_CACHE)))
    return _ORACLE_CACHE[case.id] or None


def contract_violations(contracts: Contracts, subject: str, case: Case, device: Device,
                        context: str = "default", repeats: int | None = None) -> list[Violation]:
    """Everything the contract for subject x device x context requires, checked in this process:
    run-to-run bits, identity with the contexts it names, and gradient error against the oracle."""
    if contracts.bad_rules(subject, device.kind, case.tags, context):
        # A rule names this kind of input (e.g. ids:empty): it decides, not the determinism line.
        return bad_input_violations(contracts, subject, case, device, context)
    contract = contracts.find(subject, device.kind, context)
    if contract is None:
        return [no_contract(subject, device.kind, context, case)]
    results = run_repeats(subject, case, device, context, repeats)
    if results[0].status == "skipped":
        pytest.skip(results[0].skip_reason or "skipped")
    failed = [r for r in results if not r.ok]
    if failed:
        e = failed[0].error
        return [Violation(f"run {failed[0].status}", subject, device.id, context, "", str(e),
                          contract.describe(), case)]
    reps = [r.arrays for r in results]
    out = check_repeats(contract, case, subject, device.id, context, reps)
    for other in contract.identical_across:
        if other != context:
            o = execute(get_subject(subject), case, device, get_context(other))
            if o.ok:
                out += check_across(contract, case, subject, device.id, context, reps[0], other, o.arrays)
    oracle = _oracle(case)
    if oracle is not None:
        out += check_oracle(contract, case, subject, device.id, context, reps[0], oracle)
    return out


def bad_input_violations(contracts: Contracts, subject: str, case: Case, device: Device,
                         context: str = "default") -> list[Violation]:
    """Run a bad input once and check it against its rule (or the case's own expectation)."""
    r = execute(get_subject(subject), case, device, get_context(context))
    if r.status == "skipped":
        pytest.skip(r.skip_reason or "skipped")
    return check_bad_input(contracts.bad_rules(subject, device.kind, case.tags, context), case, r)


_FIRST_FAILURE: list[str] = []


def contract_property(test: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a ``@given`` test so a divergence that does not reproduce while shrinking (Hypothesis
    then calls the test flaky) is still a clear contract failure that prints the original example.

    Inside the test, call :func:`assert_contract` (not :func:`assert_no_violations`): it remembers the first
    dossier before raising.
    """

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from hypothesis.errors import Flaky, FlakyFailure

        from harness.core.errors import ContractViolation

        _FIRST_FAILURE.clear()
        try:
            return test(*args, **kwargs)
        except (Flaky, FlakyFailure) as exc:
            original = _FIRST_FAILURE[0] if _FIRST_FAILURE else "(no dossier recorded)"
            raise ContractViolation(
                "Divergence found, but it did not reproduce while shrinking (Hypothesis: flaky). "
                "This is a contract failure: nondeterminism is exactly what is forbidden.\n\n"
                f"The original example:\n{original}") from exc

    return wrapper


def assert_contract(violations: Sequence[Violation]) -> None:
    """Like :func:`harness.outputs.gate.assert_no_violations`, remembering the first dossier for flaky reports."""
    if violations and not _FIRST_FAILURE:
        _FIRST_FAILURE.append(violations[0].dossier())
    assert_no_violations(violations)


def subjects_of(family: str) -> list[str]:
    """Registered non-oracle, non-control subjects of a family (the ones the gate covers)."""
    from harness.subjects.registry import SUBJECTS

    return [n for n, s in SUBJECTS.items() if s.family == family and not n.startswith(("oracle.", "control."))]


def profile_bounds(family: str) -> dict[str, Any]:
    """The strategy bounds of the active profile for ``family``."""
    from harness.generate.strategies import bounds_for

    return bounds_for(GateState.profile, family)


def in_ci() -> bool:
    return bool(os.environ.get("CI"))
