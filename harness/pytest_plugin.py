"""The pytest plugin: options, header, device parametrization, and the in-process contract checks.

Loaded by the project's ``conftest.py`` (``pytest_plugins = ("harness.pytest_plugin",)``); a team that
puts the gate in its own CI loads it the same way.

- ``--device cpu|gpu|all`` (default all): which devices the ``device`` argument of a test takes.
  Each becomes its own test id (``[cpu]``, ``[gpu:0]``); GPU ones carry the ``gpu`` mark and skip
  with a short reason where there is no CUDA device.
- ``--contracts FILE``: the contracts file (default: the shipped ``contracts.toml``).
- ``--baseline DIR``: a stored report directory for the baseline suite.
- ``--gate-repeats R``: in-process repetitions per example (default 3).
- ``--subject-plugin MOD:OBJ``: subjects to add or replace (repeatable), loaded into this process, where this
  gate runs its subjects; the printed replay commands carry it. A subject registered any other way (a pytest
  plugin or conftest calling ``register``) gets no command: its dossier says why instead.
- The header prints the Hypothesis profile, the seed, the devices and the contract file.
- What the options decide is one frozen :class:`GateSession` on ``config.stash[GATE]`` (the ``gate`` fixture
  gives it to a test); the helpers below a test calls (:func:`contract_violations` and the others) read the
  session of the test running now, bound around each test by an autouse fixture.
- On import it puts the workers' environment defaults (:data:`~harness.core.worker_defaults.WORKER_ENV_DEFAULTS`)
  into this process's environment where the user's does not set them, before it imports NumPy: this gate runs
  subjects in the test process, as pytest-xdist's workers (started from it) do, and OpenBLAS's idle threads
  would otherwise spin for a tenth of a second after each multithreaded product, on the core the other
  xdist worker needs. Where another plugin imported NumPy first, only the processes started from here get it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import pytest

from harness.core.worker_defaults import set_worker_defaults

# before the imports below load NumPy (and with it OpenBLAS, which reads its settings once, when it loads)
set_worker_defaults(os.environ)

from harness.core.cases import Case  # noqa: E402 - after the environment defaults above
from harness.core.devices import Device  # noqa: E402
from harness.core.records import Measure  # noqa: E402
from harness.judge.contracts import Contracts, load_contracts  # noqa: E402
from harness.judge.violations import Violation, assert_no_violations  # noqa: E402
from harness.subjects.registry import get_subject  # noqa: E402

__all__ = ["measures_in_process", "contract_violations", "bad_input_violations",
           "contract_property", "assert_contract", "ExampleCounter", "GateSession", "GATE", "gate_of",
           "cases_for", "min_examples", "check_every_example",
           "check_real_scale"]


@dataclass(frozen=True)
class GateSession:
    """What the options of this pytest session decide (built once, in pytest_configure)."""

    contracts: Contracts | None = None
    devices: tuple[Device, ...] = ()
    repeats: int = 3
    profile: str = "dev"
    baseline: str | None = None
    #: ``--subject-plugin`` specs loaded into this session, and the subject names they gave.
    plugins: tuple[str, ...] = ()
    plugin_subjects: frozenset[str] = frozenset()


#: Where the session's :class:`GateSession` lives: ``config.stash[GATE]``.
GATE = pytest.StashKey[GateSession]()
#: The session of the test running now (bound by :func:`_bind_gate_session` around each test).
_RUNNING: ContextVar[GateSession] = ContextVar("harness_gate_session", default=GateSession())


def gate_of(config: Any) -> GateSession:
    """The :class:`GateSession` of a pytest ``config`` (the defaults before pytest_configure built it)."""
    return config.stash.get(GATE, GateSession())


@pytest.fixture(scope="session")
def gate(pytestconfig: Any) -> GateSession:
    """This session's options: devices, repeats, profile, baseline, plug-ins, contracts."""
    return gate_of(pytestconfig)


@pytest.fixture(autouse=True)
def _bind_gate_session(request: Any) -> Iterator[None]:
    """Let the helpers a test calls see its session's options without a parameter of their own."""
    token = _RUNNING.set(gate_of(request.config))
    try:
        yield
    finally:
        _RUNNING.reset(token)


# ---- options and header ----------------------------------------------------------------------------
#: The options the plug-in shares with ``harness gate``: (GateOptions field, where pytest keeps its value).
SHARED_OPTIONS = (("contracts", "contracts"), ("baseline", "baseline"), ("plugins", "subject_plugin"))


class _Adder:
    """pytest's option group with argparse's ``add_argument`` (what :func:`harness.core.options.add_flag` calls)."""

    def __init__(self, group: Any) -> None:
        self.group = group

    def add_argument(self, *names: str, **kw: Any) -> None:
        self.group.addoption(*names, **kw)


def shared_flags() -> list[tuple[Any, str]]:
    """(declaration, pytest's dest) of each option the plug-in takes from ``harness gate``'s record."""
    from harness.core.options import fields_with_flags
    from harness.verbs.gate import GateOptions

    where = dict(SHARED_OPTIONS)
    return [(o, where[f.name]) for f, o in fields_with_flags(GateOptions) if f.name in where]


def pytest_addoption(parser: Any) -> None:
    from harness.core.options import add_flag

    g = parser.getgroup("harness", "determinism harness")
    g.addoption("--device", default="all", help="devices to instantiate device-generic tests on: cpu, gpu, all")
    g.addoption("--gate-repeats", type=int, default=3, help="in-process repetitions per example (default 3)")
    for o, dest in shared_flags():  # declared once, on harness gate's record
        add_flag(_Adder(g), o, dest, None)


def _gpu_count_without_cupy() -> int:
    """CUDA devices as nvidia-smi lists them (0 where it is absent or fails): asked before CuPy initializes."""
    from harness.core.nvsmi import query_gpus

    return len(query_gpus()["gpus"])


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


def one_lane_per_xdist_worker(environ: Any = os.environ) -> str | None:
    """Under pytest-xdist the workers already use the cores: each campaign a test runs (here or in a
    ``python -m harness`` child) gets one lane (``HARNESS_JOBS=1``) unless the environment says otherwise.
    Returns what it set, or None."""
    from harness.execute.settings import JOBS_ENV

    if not environ.get("PYTEST_XDIST_WORKER", "").startswith("gw") or JOBS_ENV in environ:
        return None
    environ[JOBS_ENV] = "1"
    return "1"


def pytest_configure(config: Any) -> None:
    from harness.core.errors import InvalidArgument

    pin_xdist_worker_gpu()
    one_lane_per_xdist_worker()
    from harness.generate.profiles import load_profile

    explicit = config.getoption("hypothesis_profile", default=None)
    try:
        profile = load_profile(explicit)
    except InvalidArgument as exc:
        raise pytest.UsageError(str(exc)) from None
    choice = config.getoption("device")
    if choice not in ("cpu", "gpu", "all") and not choice.startswith("gpu:"):
        raise pytest.UsageError(f"--device={choice!r} is not cpu, gpu, gpu:N or all")
    from harness.core.devices import select_devices

    try:
        # The one rule: a device asked for by name must be usable (a GPU runner whose CuPy is broken must not
        # go green); "all" means what is here, the rest skipped with its reason.
        selection = select_devices(choice)
    except InvalidArgument as exc:
        raise pytest.UsageError(f"--device: {exc}") from None
    from harness.core.devices import gpu_problem

    # The one GPU-presence rule (harness env --check says the same): nvidia-smi sees a GPU, so the GPU suites
    # must run; a GPU that CuPy cannot use is an error, not a skip, unless GPU checks are disabled (make GPU=0).
    problem = gpu_problem()
    if problem:
        raise pytest.UsageError(problem)
    contracts = load_contracts(config.getoption("contracts"))
    plugins = tuple(config.getoption("subject_plugin") or ())
    config.stash[GATE] = GateSession(
        contracts=contracts, devices=tuple(selection.planned), repeats=max(1, int(config.getoption("gate_repeats"))),
        profile=profile, baseline=config.getoption("baseline"), plugins=plugins,
        plugin_subjects=_load_plugins(plugins))


def pytest_report_header(config: Any) -> list[str]:
    from hypothesis import settings

    s = settings()
    seed = config.getoption("hypothesis_seed", default=None)
    seed_text = "derandomized" if s.derandomize else (str(seed) if seed is not None else "random (printed on failure)")
    gs = gate_of(config)
    devs = []
    for d in gs.devices:
        ok, reason = d.availability()
        devs.append(d.id if ok else f"{d.id} (skipped: {reason})")
    if not any(d.is_gpu and d.available for d in gs.devices):
        devs.append("no GPU: every GPU test is skipped with its reason")
    c = gs.contracts
    return [f"harness: profile={gs.profile} (max_examples={s.max_examples}) seed={seed_text} "
            f"repeats={gs.repeats}",
            f"harness: devices={', '.join(devs)}",
            f"harness: contracts={c.path if c else '?'}"
            + (f" baseline={gs.baseline}" if gs.baseline else "")]


def pytest_generate_tests(metafunc: Any) -> None:
    """Instantiate every test that takes ``device`` once per selected device."""
    if "device" not in metafunc.fixturenames:
        return
    params = []
    for d in gate_of(metafunc.config).devices:
        ok, reason = d.availability()
        marks = [pytest.mark.gpu] if d.is_gpu else []
        if not ok:
            marks.append(pytest.mark.skip(reason=reason))
        params.append(pytest.param(d, id=d.id, marks=marks))
    metafunc.parametrize("device", params)


@pytest.fixture(scope="session")
def contracts(gate: GateSession) -> Contracts:
    """The contracts file in use."""
    assert gate.contracts is not None
    return gate.contracts


# ---- in-process checks -------------------------------------------------------------------------------------
def measures_in_process(contracts: Contracts, subject: str, case: Case, device: Device, context: str = "default",
                        repeats: int | None = None) -> list[Measure]:
    """Run one case R times in this process and measure it exactly as a campaign's measure pass would
    (:func:`harness.execute.inprocess.measure_here`). Skips the calling test (with the reason) where the
    device cannot run it."""
    from harness.execute.inprocess import measure_here

    contract = contracts.find(subject, device.kind, context)
    others = [c for c in (getattr(contract, "identical_across", ()) or ()) if c != context]
    here = measure_here(contracts, subject, case, device, context, repeats or _RUNNING.get().repeats,
                        contexts=others)
    if here.results[0].status == "skipped":
        pytest.skip(here.results[0].skip_reason or "skipped")
    return here.measures


def _load_plugins(specs: tuple[str, ...]) -> frozenset[str]:
    """Load each ``--subject-plugin`` here (this gate runs its subjects in this process); the names of the
    subjects they gave. A bad one stops the session with its one-line error."""
    from harness.core.errors import PluginError
    from harness.subjects.registry import load_plugin

    names: set[str] = set()
    for spec in specs:
        try:
            names.update(s.name for s in load_plugin(spec, in_process=True))
        except PluginError as exc:
            raise pytest.UsageError(f"--subject-plugin: {exc}") from None
    return frozenset(names)


def _outside_plugins(subject: str) -> str:
    """Why a printed command cannot run ``subject`` as this session did, or "": its code is neither the
    harness's own nor from a ``--subject-plugin`` (a pytest plugin or conftest registered it), so a replay would
    run the shipped subject of that name, or none."""
    module = getattr(get_subject(subject).run, "__module__", None) or "?"
    if module.startswith("harness.") or subject in _RUNNING.get().plugin_subjects:
        return ""
    return (f"{subject} runs code of module {module!r}, which this session registered outside --subject-plugin, "
            f"so a replay would not load it; give it as --subject-plugin {module}:OBJECT")


def _violations(measures: Sequence[Measure], case: Case, contracts: Contracts) -> list[Violation]:
    """The failing measures as dossiers whose replay command is the finding's own
    (:func:`harness.judge.findings.replay_argv`): the case is written to ``.harness-cases/cases/`` first, so the
    printed command runs as printed, and it names the contracts file that judged (unless the shipped one)."""
    from harness.core.fileio import atomic_write
    from harness.judge.findings import Origin, contracts_argument
    from harness.judge.violations import violations

    found = violations(measures)
    if not found:
        return []
    path = os.path.join(CASES_DIR, "cases", f"{case.id}.json")
    atomic_write(path, case.to_json() + "\n")
    # every command of a dossier (Reproduce, Shrink, Localize) from one finding, with the session's contracts
    # file and plug-ins
    origin = Origin(CASES_DIR, contracts=contracts_argument(contracts.path), plugins=_RUNNING.get().plugins)
    out = []
    for v in found:
        why = _outside_plugins(v.subject)
        v = Violation(v.measure, case_file=path, no_replay=why, origin=origin,
                      role=get_subject(v.subject).role)
        out.append(dataclasses.replace(v, replay="" if why else v.finding().replay()))
    return out


#: Where a failing pytest check writes its case, so that its printed ``replay`` command runs as printed.
CASES_DIR = ".harness-cases"


def contract_violations(contracts: Contracts, subject: str, case: Case, device: Device,
                        context: str = "default", repeats: int | None = None) -> list[Violation]:
    """The broken measures of :func:`measures_in_process`, as dossiers whose replay command writes the case
    file and reruns it."""
    return _violations(measures_in_process(contracts, subject, case, device, context, repeats), case, contracts)


def bad_input_violations(contracts: Contracts, subject: str, case: Case, device: Device,
                         context: str = "default") -> list[Violation]:
    """A bad input, run once and judged by its rule (or the case's own expectation)."""
    return contract_violations(contracts, subject, case, device, context, repeats=1)


class ExampleCounter:
    """Counts the Hypothesis examples a test really checked, so a test that skipped them all fails.

    ``counter.ran()`` after each checked example; ``counter.require(n)`` at the end raises when fewer ran."""

    def __init__(self) -> None:
        self.count = 0

    def ran(self) -> None:
        self.count += 1

    def require(self, minimum: int, what: str = "examples") -> None:
        __tracebackhide__ = True
        if self.count < minimum:
            raise AssertionError(f"only {self.count} {what} were really checked (at least {minimum} required)")


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
    """Like :func:`harness.judge.violations.assert_no_violations`, remembering the first dossier for flaky reports."""
    __tracebackhide__ = True
    if violations and not _FIRST_FAILURE:
        _FIRST_FAILURE.append(violations[0].dossier())
    assert_no_violations(violations)


def subjects_of(family: str) -> list[str]:
    """Registered non-oracle, non-control subjects of a family (the ones the gate covers)."""
    from harness.subjects.registry import SUBJECTS

    return [n for n, s in SUBJECTS.items() if s.family == family and s.role == "subject"]


def cases_for(subject: str) -> Any:
    """The Hypothesis strategy of valid cases a subject takes, within the active profile's bounds: its family's
    strategy, narrowed where the subject takes less (ESPnet: float32 W only) and filtered by its ``accepts``,
    so no example is drawn only to be thrown away by the test."""
    from harness.generate import strategies

    subj = get_subject(subject)
    if _RUNNING.get().profile == "realistic":  # drawn around the recipes' configurations, not within bounds
        from harness.generate.recipes import recipe_cases

        return recipe_cases(subj.family).filter(subj.applies_to)
    bounds = profile_bounds(subj.family)
    if subj.family == "embed" and subject.startswith("espnet."):
        bounds["w_dtypes"] = ("float32",)
    family: dict[str, Callable[..., Any]] = {"embed": strategies.embed_cases, "lstm": strategies.lstm_cases,
                                             "pipeline": strategies.pipeline_cases}
    base = family[subj.family](**bounds)
    return base.filter(subj.applies_to)


def check_every_example(contracts: Contracts, subject: str, device: Device) -> int:
    """The property gate of one subject: every example of :func:`cases_for` keeps its contract (a flaky
    divergence included, see :func:`contract_property`). Fails when fewer than :func:`min_examples` examples
    were really checked; returns how many were."""
    __tracebackhide__ = True
    from hypothesis import given

    counter = ExampleCounter()

    @contract_property
    @given(case=cases_for(subject))
    def check(case: Case) -> None:
        assert_contract(contract_violations(contracts, subject, case, device))
        counter.ran()

    check()
    counter.require(min_examples())
    return counter.count


def check_real_scale(contracts: Contracts, subject: str, device: Device, repeats: int = 2) -> int:
    """The real-scale cases of every default corpus (:func:`harness.generate.corpora.real_scale_cases`) that
    ``subject`` takes keep its contract, ``repeats`` runs each (they run for a second or more: fewer repeats
    than the property tests'); fails where none applies (the corpus lost them). Returns how many ran."""
    __tracebackhide__ = True
    from harness.generate.corpora import real_scale_cases
    from harness.generate.edges import with_edge_tags

    subj = get_subject(subject)
    cases = [with_edge_tags(c) for c in real_scale_cases() if subj.applies_to(c)]
    assert cases, f"no real-scale case applies to {subject}: the corpus lost them"
    for case in cases:
        assert_contract(contract_violations(contracts, subject, case, device, repeats=repeats))
    return len(cases)


def min_examples() -> int:
    """How many examples a property test must really check: half the profile's ``max_examples``, at least 1."""
    from hypothesis import settings

    return max(1, settings().max_examples // 2)


def profile_bounds(family: str) -> dict[str, Any]:
    """The strategy bounds of the active profile for ``family``."""
    from harness.generate.profile_sizes import bounds_for

    return bounds_for(_RUNNING.get().profile, family)
