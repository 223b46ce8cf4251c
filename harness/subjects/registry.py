"""The registry: an explicit mapping from name to subject, plus plug-ins.

The harness's own subjects are listed here by hand, no import-time magic. Users add theirs
without editing the harness: ``--subject-plugin package.module:object`` on the command line,
or an entry point in the ``harness.subjects`` group. The object may be a :class:`Subject`, an
iterable of them, or a zero-argument callable returning either.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from typing import Any, Iterable, Mapping, Sequence

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.core.errors import CaseError, PluginError, UnknownSubject
from harness.subjects import controls, embed, lstm, model, pipeline
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "get_subject", "register", "load_plugin", "load_entry_points", "subjects_for",
           "ORACLE_FOR_FAMILY", "ORDER_REFERENCES", "order_reference", "prepare_accepts", "accepts_error",
           "check_case_for_subject", "load_case_for_subject"]

ENTRY_POINT_GROUP = "harness.subjects"


def _oracle_run(family: str):
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        from harness.subjects.oracle import ORACLES

        arrays = build_arrays(case)  # the oracle reads every float array as float64 itself
        with rec.phase("forward"):
            out = ORACLES[family](case.spec, arrays)
        rec.outputs(out)

    return run


def _oracle_accepts(case: Case) -> bool:
    from harness.subjects.oracle import documents

    return ((case.expect is None or documents(case.family, case.tags))
            and float(case.spec.get("dropout", 0.0)) == 0.0)


def _order_run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
    with rec.phase("backward"):
        out = embed.sequential_grad_W(case.spec, build_arrays(case))
    rec.outputs(out)


#: The reference summed in a declared accumulation order, per family and ``Declared.order``.
ORDER_REFERENCES = {("embed", embed.SEQUENTIAL): "reference.embed_sequential"}


_ORACLE_DECL = {"cpu": Declared(True, "float64 NumPy written from the definitions; exact scatter sums")}

_OWN: tuple[Subject, ...] = (
    *embed.SUBJECTS,
    *lstm.SUBJECTS,
    *pipeline.SUBJECTS,
    *model.SUBJECTS,
    Subject("oracle.embed", "embed", _oracle_run("embed"), devices=("cpu",), role="oracle", declared=_ORACLE_DECL,
            accepts=_oracle_accepts, description="independent float64 oracle: embed forward, backward, double backward",
            double_backward=True, source="harness/subjects/oracle.py"),
    Subject("oracle.lstm", "lstm", _oracle_run("lstm"), devices=("cpu",), role="oracle", declared=_ORACLE_DECL,
            accepts=_oracle_accepts, description="independent float64 oracle: NStepLSTM forward and backward",
            source="harness/subjects/oracle.py"),
    Subject("oracle.pipeline", "pipeline", _oracle_run("pipeline"), devices=("cpu",), role="oracle",
            declared=_ORACLE_DECL, accepts=_oracle_accepts,
            description="independent float64 oracle: embedding into NStepLSTM", source="harness/subjects/oracle.py"),
    # A reference, not a subject: grad.W summed in the order the CPU embeddings declare, in their dtype. Run in
    # the workers like the oracles; the ``order`` measure compares it bit for bit.
    Subject("reference.embed_sequential", "embed", _order_run, devices=("cpu",), role="oracle",
            declared={"cpu": Declared(True, "NumPy, one row at a time in index order", order=embed.SEQUENTIAL)},
            accepts=_oracle_accepts, description="grad.W summed one position at a time in index order, in the "
            "subject's dtype (the declared CPU order of embed_id / EmbedIDFunction)",
            source="harness/subjects/embed.py"),
    *controls.SUBJECTS,
)

#: The oracle subject whose outputs gradient error is measured against, per family.
ORACLE_FOR_FAMILY = {"embed": "oracle.embed", "lstm": "oracle.lstm", "pipeline": "oracle.pipeline"}


def _with_oracle(s: Subject) -> Subject:
    """``s`` with its judging oracle filled in: the family's, unless it names one or is an oracle itself."""
    if s.role == "oracle" or s.oracle is not None or s.family not in ORACLE_FOR_FAMILY:
        return s
    return dataclasses.replace(s, oracle=ORACLE_FOR_FAMILY[s.family])


#: name -> subject. Plug-ins are added by :func:`register`.
SUBJECTS: dict[str, Subject] = {s.name: _with_oracle(s) for s in _OWN}


def order_reference(subject: str, device_kind: str) -> tuple[str, str] | None:
    """``(reference subject, the declaration's text)`` for a subject that declares an accumulation order on
    this device kind that a reference can pin, else None."""
    s = SUBJECTS.get(subject)
    if s is None or s.role == "oracle":
        return None
    d = s.declared_for(device_kind)
    name = ORDER_REFERENCES.get((s.family, getattr(d, "order", "")))
    return None if name is None else (name, f"{d.order} ({d.reason})")


def get_subject(name: str) -> Subject:
    """The subject registered as ``name``."""
    try:
        return SUBJECTS[name]
    except KeyError:
        raise UnknownSubject(f"subject={name!r} is not registered (known: {', '.join(SUBJECTS)})") from None


def register(subject: Subject, *, replace: bool = False) -> Subject:
    """Add a subject to the registry; a name clash is a PluginError unless ``replace``."""
    if not isinstance(subject, Subject):
        raise PluginError(f"plug-in object {subject!r} is not a harness.subjects.Subject")
    if subject.name in SUBJECTS and SUBJECTS[subject.name] != _with_oracle(subject) and not replace:
        raise PluginError(f"subject name={subject.name!r} is already registered")
    subject = _with_oracle(subject)
    SUBJECTS[subject.name] = subject
    return subject


def _as_subjects(obj: Any, where: str) -> list[Subject]:
    if callable(obj) and not isinstance(obj, Subject):
        obj = obj()
    if isinstance(obj, Subject):
        return [obj]
    if isinstance(obj, Iterable):
        items = list(obj)
        if all(isinstance(s, Subject) for s in items):
            return items
    raise PluginError(f"plug-in {where} gives {type(obj).__name__}, not a Subject or an iterable of Subjects")


#: Set where plug-in code is meant to run: worker processes, the sandboxed child of a verb, the manifest child.
IN_PROCESS_ENV = "HARNESS_PLUGIN_IN_PROCESS"
_IN_PROCESS_MAINS = ("harness.execute.worker", "harness.subjects.manifest")


def _in_process() -> bool:
    """True in a process that runs subject code (a worker, a sandboxed verb's child); False in the harness's
    own process, which takes a plug-in's manifest in a child instead of importing it."""
    import os
    import sys

    main = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
    # HARNESS_SANDBOX_CHILD is harness.execute.sandbox.CHILD_ENV (named here: subjects may not import execute).
    return (os.environ.get(IN_PROCESS_ENV) == "1" or os.environ.get("HARNESS_SANDBOX_CHILD") == "1"
            or main in _IN_PROCESS_MAINS)


def load_plugin(spec: str, *, in_process: bool | None = None) -> list[Subject]:
    """Load ``package.module:object`` and register what it gives; returns the subjects.

    In the harness's own process the plug-in is never imported: its manifest (each subject's fields as plain
    data) is taken in a child process with a timeout (:mod:`harness.subjects.manifest`) and proxy subjects are
    registered, whose ``accepts`` answers come from children too and whose ``run`` only workers have. In a
    worker (``in_process``) the module is imported and its real subjects registered."""
    if not isinstance(spec, str) or ":" not in spec:
        raise PluginError(f"subject-plugin={spec!r} must look like package.module:object")
    if not (_in_process() if in_process is None else in_process):
        return _load_manifest(spec)
    mod_name, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - a broken plug-in is one line
        raise PluginError(f"subject-plugin={spec!r}: module {mod_name!r} failed to import: "
                          f"{type(exc).__name__}: {exc}") from exc
    try:
        obj = getattr(mod, attr)
    except AttributeError:
        raise PluginError(f"subject-plugin={spec!r}: module {mod_name!r} has no {attr!r}") from None
    subjects = _as_subjects(obj, repr(spec))
    for s in subjects:
        register(s, replace=True)
    return subjects


#: (subject name, case id) -> True/False, or the one-line error its accepts() gave, for plug-in subjects.
_ACCEPTS: dict[tuple[str, str], bool | str] = {}
#: plug-in subject name -> the spec that gave it (to ask its accepts() about more cases).
_PLUGIN_OF: dict[str, str] = {}


def _load_manifest(spec: str) -> list[Subject]:
    from harness.subjects.manifest import take_manifest

    data, _ = take_manifest(spec)
    subjects = [_proxy(d) for d in data]
    for s in subjects:
        register(s, replace=True)
        _PLUGIN_OF[s.name] = spec
    return subjects


def _proxy(d: Mapping[str, Any]) -> Subject:
    """A registry entry for a plug-in subject from its manifest: every field, and no code of the plug-in."""
    name = d["name"]

    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        raise PluginError(f"plug-in subject {name!r} runs only in worker processes")

    def accepts(case: Case) -> bool:
        answer = _ACCEPTS.get((name, case.id))
        if answer is None:
            prepare_accepts([SUBJECTS[name]], [case])
            answer = _ACCEPTS.get((name, case.id), True)
        return True if isinstance(answer, str) else bool(answer)  # an error: a task, whose row says it

    declared = {k: Declared(v.get("deterministic"), str(v.get("reason", "")), str(v.get("order", "")))
                for k, v in d["declared"].items()}
    return Subject(name, d["family"], run, devices=tuple(d["devices"]), declared=declared,
                   description=str(d.get("description", "")), double_backward=bool(d.get("double_backward")),
                   accepts=accepts if d.get("has_accepts", True) else None, source=str(d.get("source", "")),
                   role=d["role"], oracle=d.get("oracle"))


def prepare_accepts(subjects: Iterable[Subject], cases: Sequence[Case]) -> None:
    """Ask plug-in subjects' ``accepts()`` about every case at once, in one child per plug-in (not per case)."""
    by_spec: dict[str, list[Case]] = {}
    for s in subjects:
        spec = _PLUGIN_OF.get(s.name)
        if spec is None or s.family not in {c.family for c in cases}:
            continue
        todo = [c for c in cases if c.family == s.family and (s.name, c.id) not in _ACCEPTS]
        if todo:
            have = {c.id for c in by_spec.setdefault(spec, [])}
            by_spec[spec].extend(c for c in todo if c.id not in have)
    from harness.subjects.manifest import take_manifest

    for spec, todo in by_spec.items():
        _, answers = take_manifest(spec, todo)
        _ACCEPTS.update(answers)


def accepts_error(subject: str, case_id: str) -> str | None:
    """The one-line error a plug-in subject's ``accepts()`` gave for this case (a raise, a crash, a hang, an
    exit), else None: the task becomes an error row saying it."""
    answer = _ACCEPTS.get((subject, case_id))
    return answer if isinstance(answer, str) else None


def load_entry_points() -> list[Subject]:
    """Register every subject offered through the ``harness.subjects`` entry-point group (each loaded like a
    ``--subject-plugin``: its manifest taken in a child, unless this process runs subject code)."""
    out: list[Subject] = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            out.extend(load_plugin(ep.value))
        except PluginError as exc:
            raise PluginError(f"entry point {ep.name!r} ({ep.value}): {exc}") from None
    return out


def subjects_for(names: Iterable[str] | None = None) -> list[Subject]:
    """The subjects named (all registered ones when ``names`` is None), in registry order."""
    if names is None:
        return list(SUBJECTS.values())
    return [get_subject(n) for n in names]


def check_case_for_subject(case: Case, subject: Subject) -> None:
    """Refuse up front, in one line (:class:`CaseError`), a case the subject cannot take.

    A case of another family (an lstm case on an embed subject gave ``KeyError: 'n_layers'``
    deep inside the subject) is refused here; call before any work starts (replay, report).
    """
    from harness.core.case_limits import check_case_family

    check_case_family(case, subject.family, subject.name)
    if not subject.applies_to(case):  # a campaign plans no such task; replay, shrink and localize refuse it
        raise CaseError(f"case {case.id} ({_case_traits(case)}): subject={subject.name!r} does not take it (its "
                        f"accepts() is false)")


def _case_traits(case: Case) -> str:
    """The spec fields subjects' ``accepts()`` look at, as the refusal shows them."""
    from harness.core.schema_check import brief

    keys = ("bidirectional", "dtype", "w_dtype", "id_dtype")
    shown = [f"$.spec.{k}={brief(case.spec[k])}" for k in keys if k in case.spec]
    return ", ".join(shown + ["a bad input" if case.bad else "a valid case"])


def load_case_for_subject(path: str, case_id: str | None, subject: Subject, max_bytes: int | None) -> Case:
    """The one case of replay, localize and shrink, read and refused up front in one line: a bad file or id, a
    case of another family, or one whose estimated peak needs more than ``max_bytes`` (checked before any array
    is built; ``None`` is the machine's default: :func:`harness.core.cost.memory_limit`)."""
    from harness.core.corpus_files import load_case_file
    from harness.core.cost import check_case_cost

    case = load_case_file(path, case_id)
    try:
        check_case_for_subject(case, subject)
    except CaseError as exc:
        raise CaseError(f"{path}: {exc}") from None
    check_case_cost(case, explicit=max_bytes)  # its estimated peak, the subject's or its oracle's
    return case
