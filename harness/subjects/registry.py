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
from typing import Any, Iterable

from harness.core.cases import Case, build_arrays
from harness.core.contexts import Context
from harness.core.devices import Device
from harness.core.errors import PluginError, UnknownSubject
from harness.subjects import controls, embed, lstm, pipeline
from harness.subjects.base import Declared, Recorder, Subject

__all__ = ["SUBJECTS", "get_subject", "register", "load_plugin", "load_entry_points", "subjects_for",
           "ORACLE_FOR_FAMILY", "ORDER_REFERENCES", "order_reference"]

ENTRY_POINT_GROUP = "harness.subjects"


def _oracle_run(family: str):
    def run(case: Case, device: Device, context: Context, rec: Recorder) -> None:
        from harness.subjects.oracle import ORACLES

        arrays = {k: (v.astype("float64") if v.dtype.kind == "f" else v) for k, v in build_arrays(case).items()}
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
    Subject("oracle.embed", "embed", _oracle_run("embed"), devices=("cpu",), role="oracle", declared=_ORACLE_DECL,
            accepts=_oracle_accepts, description="independent float64 oracle: embed forward, backward, double backward",
            double_backward=True, source="harness/subjects/oracle.py"),
    Subject("oracle.lstm", "lstm", _oracle_run("lstm"), devices=("cpu",), role="oracle", declared=_ORACLE_DECL,
            accepts=_oracle_accepts, description="independent float64 oracle: NStepLSTM forward and backward",
            source="harness/subjects/oracle.py"),
    Subject("oracle.pipeline", "pipeline", _oracle_run("pipeline"), devices=("cpu",), role="oracle", declared=_ORACLE_DECL,
            accepts=_oracle_accepts, description="independent float64 oracle: embedding into NStepLSTM",
            source="harness/subjects/oracle.py"),
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


def load_plugin(spec: str) -> list[Subject]:
    """Load ``package.module:object`` and register what it gives; returns the subjects."""
    if ":" not in spec:
        raise PluginError(f"subject-plugin={spec!r} must look like package.module:object")
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


def load_entry_points() -> list[Subject]:
    """Register every subject offered through the ``harness.subjects`` entry-point group."""
    out: list[Subject] = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            out.extend(_as_subjects(ep.load(), f"entry point {ep.name!r}"))
        except PluginError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise PluginError(f"entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
    for s in out:
        register(s, replace=True)
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
    from harness.core.cases import check_case_family

    check_case_family(case, subject.family, subject.name)
