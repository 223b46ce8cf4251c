"""A plug-in's manifest, taken in a child process: the harness never imports plug-in code itself.

``python -m harness.subjects.manifest SPEC CASES`` (run by :func:`take_manifest`) imports the plug-in, takes what
it gives (a Subject, an iterable of them, or a callable returning either), checks every field, and answers with
plain data on a private pipe: one line per subject (name, family, role, oracle, devices, declared, ...), then one
line per case x subject saying whether ``accepts(case)`` takes it (or the exception it raised). The parent builds
proxy subjects from that (:func:`harness.subjects.registry.load_plugin`); only workers run the real code.

Whatever the plug-in does here (raise, segfault, hang, ``sys.exit(0)``, ``os._exit(3)``, print to stdout, give an
endless generator) is, at load, one :class:`~harness.core.errors.PluginError` line and, in ``accepts()``, an error
for that one case: the child is restarted after the case it died on.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterable, Sequence

from harness.core import lifeline
from harness.core.errors import PluginError

__all__ = ["take_manifest", "TIMEOUT_ENV", "load_timeout", "MAX_SUBJECTS"]

#: Seconds a plug-in may take to load (import, factory), and each ``accepts()`` call; environment override.
TIMEOUT_ENV = "HARNESS_PLUGIN_TIMEOUT"
#: More subjects than this from one plug-in is an error (an endless generator must end somewhere).
MAX_SUBJECTS = 1000
#: The child's answer lines start with this (on its own pipe; the plug-in's prints go to stderr).
_TAG = "harness-manifest "
#: The cases file a manifest child reads (its owner's pid follows: one left by a killed harness is swept).
_MANIFEST_PREFIX = "harness-manifest-"
#: After this many child deaths in ``accepts()`` (or one hang), the remaining cases are not tried again.
_MAX_RESTARTS = 3


def load_timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV, "120")
    try:
        value = float(text)
    except ValueError:
        raise PluginError(f"{TIMEOUT_ENV}={text!r} must be a number of seconds") from None
    if not 0 < value < 86400:
        raise PluginError(f"{TIMEOUT_ENV}={text!r} must be between 0 and 86400 seconds")
    return value


# ---------------------------------------------------------------------------------------------------- the child

def _subject_data(s: Any) -> dict[str, Any]:
    """A subject's plain-data manifest, every field checked (a wrong type is a one-line PluginError)."""
    from harness.core.vocabulary import CASE_FAMILIES, ROLES
    from harness.subjects.base import Declared, Subject

    if not isinstance(s, Subject):
        raise PluginError(f"gives {type(s).__name__}, not a harness.subjects.Subject")
    where = f"subject {s.name!r}"
    if not isinstance(s.name, str) or not s.name.strip() or len(s.name) > 200 or not s.name.isprintable():
        raise PluginError(f"subject name={s.name!r} must be a printable string of 1 to 200 characters")
    if s.family not in CASE_FAMILIES:
        raise PluginError(f"{where}: family={s.family!r} must be one of {', '.join(CASE_FAMILIES)}")
    if s.role not in ROLES:
        raise PluginError(f"{where}: role={s.role!r} must be one of {', '.join(ROLES)}")
    if s.oracle is not None and not isinstance(s.oracle, str):
        raise PluginError(f"{where}: oracle={s.oracle!r} must be a subject name or None")
    if isinstance(s.devices, str) or not isinstance(s.devices, (tuple, list)) or \
            not s.devices or not all(d in ("cpu", "gpu") for d in s.devices):
        raise PluginError(f"{where}: devices={s.devices!r} must be a tuple of 'cpu' and/or 'gpu'")
    if not isinstance(s.declared, dict) or not all(k in ("cpu", "gpu") and isinstance(v, Declared)
                                                    for k, v in s.declared.items()):
        raise PluginError(f"{where}: declared={s.declared!r} must map 'cpu'/'gpu' to harness.subjects.Declared")
    for k, v in s.declared.items():
        if v.deterministic not in (True, False, None) or not isinstance(v.reason, str) or not isinstance(v.order, str):
            raise PluginError(f"{where}: declared[{k!r}]={v!r} needs deterministic True/False/None, a reason and an "
                              f"order string")
    if not callable(s.run):
        raise PluginError(f"{where}: run={s.run!r} is not callable")
    if s.accepts is not None and not callable(s.accepts):
        raise PluginError(f"{where}: accepts={s.accepts!r} is not callable")
    for field in ("description", "source"):
        if not isinstance(getattr(s, field), str):
            raise PluginError(f"{where}: {field}={getattr(s, field)!r} must be a string")
    if not isinstance(s.double_backward, bool):
        raise PluginError(f"{where}: double_backward={s.double_backward!r} must be True or False")
    return {**s.to_dict(), "has_accepts": s.accepts is not None}


def _plugin_subjects(spec: str) -> list[Any]:
    """Import ``module:object`` and take its subjects (here, in the child)."""
    import importlib
    import itertools

    if ":" not in spec:
        raise PluginError("must look like package.module:object")
    mod_name, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - a broken plug-in is one line
        raise PluginError(f"module {mod_name!r} failed to import: {type(exc).__name__}: {_line(exc)}") from None
    if not hasattr(mod, attr):
        raise PluginError(f"module {mod_name!r} has no {attr!r}")
    from harness.subjects.base import Subject

    obj = getattr(mod, attr)
    if callable(obj) and not isinstance(obj, Subject):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise PluginError(f"{attr} raised {type(exc).__name__}: {_line(exc)}") from None
    if isinstance(obj, Subject):
        return [obj]
    if isinstance(obj, (str, bytes)) or not isinstance(obj, Iterable):
        raise PluginError(f"gives {type(obj).__name__}, not a Subject or an iterable of Subjects")
    try:
        items = list(itertools.islice(obj, MAX_SUBJECTS + 1))
    except Exception as exc:  # noqa: BLE001
        raise PluginError(f"iterating {attr} raised {type(exc).__name__}: {_line(exc)}") from None
    if len(items) > MAX_SUBJECTS:
        raise PluginError(f"gives more than {MAX_SUBJECTS} subjects (an endless iterable?)")
    if not items:
        raise PluginError("gives no subject")
    return items


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def _child(spec: str, cases_file: str, start: int) -> None:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the plug-in's prints go to stderr; only our answers use the saved stdout
    sys.stdout = sys.stderr

    def say(obj: Any) -> None:
        out.write(_TAG + json.dumps(obj) + "\n")
        out.flush()

    try:
        subjects = _plugin_subjects(spec)
        data = [_subject_data(s) for s in subjects]
        names = [d["name"] for d in data]
        if len(set(names)) != len(names):
            raise PluginError(f"gives two subjects named {next(n for n in names if names.count(n) > 1)!r}")
    except PluginError as exc:
        say({"error": str(exc)})
        return
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from plug-in code: one line
        say({"error": f"{type(exc).__name__}({_line(exc)}) while loading"})
        return
    say({"subjects": data})
    from harness.core.cases import Case

    with open(cases_file, encoding="utf-8") as f:
        cases = [Case.from_json(ln) for ln in f if ln.strip()]
    order = [(c, s) for c in cases for s in subjects]
    for i, (case, s) in enumerate(order):
        if i < start:
            continue
        try:
            answer: Any = bool(s.applies_to(case))
        except BaseException as exc:  # noqa: BLE001 - any exception, SystemExit included, is this case's error
            answer = f"{type(exc).__name__}: {_line(exc)}"
        say({"i": i, "accepts": answer})
    say({"done": True})


# --------------------------------------------------------------------------------------------------- the parent

class _Child:
    def __init__(self, spec: str, cases_file: str, start: int) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": root + (os.pathsep + os.environ["PYTHONPATH"]
                                                   if os.environ.get("PYTHONPATH") else "")}
        self.proc = lifeline.popen([sys.executable, "-m", "harness.subjects.manifest", spec, cases_file, str(start)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, start_new_session=True)
        self.buf = b""
        self.err = b""

    def next(self, timeout: float) -> Any:
        """The next answer; ``("timeout", None)`` or ``("ended", code)`` when none comes."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None and self.proc.stderr is not None
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode("utf-8", "replace")
                if text.startswith(_TAG):
                    try:
                        return "answer", json.loads(text[len(_TAG):])
                    except ValueError:
                        return "garbled", text[:200]
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", None
            ready, _, _ = select.select([self.proc.stdout, self.proc.stderr], [], [], left)
            for r in ready:
                chunk = os.read(r.fileno(), 65536)
                if r is self.proc.stdout:
                    if not chunk:
                        return "ended", self.proc.wait()
                    self.buf += chunk
                else:
                    self.err = (self.err + chunk)[-4000:]

    def stderr_line(self) -> str:
        lines = [ln for ln in self.err.decode("utf-8", "replace").splitlines() if ln.strip()]
        return lines[-1].strip()[:200] if lines else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


def _why(state: str, value: Any, child: _Child, timeout: float) -> str:
    if state == "timeout":
        return f"did not answer within {timeout:g} s (killed; {TIMEOUT_ENV} sets the limit)"
    if state == "garbled":
        return f"wrote a garbled answer ({value!r})"
    code = value
    if isinstance(code, int) and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"crashed ({name})" + (f": {child.stderr_line()}" if child.stderr_line() else "")
    return f"ended the process (exit code {code}) without an answer" + (
        f": {child.stderr_line()}" if child.stderr_line() else "")


def take_manifest(spec: str, cases: Sequence[Any] = (), timeout: float | None = None
                  ) -> tuple[list[dict[str, Any]], dict[tuple[str, str], bool | str]]:
    """``(subjects, accepts)`` of plug-in ``spec``, taken in child processes: each subject as plain data, and
    per (subject name, case id) True/False, or the one-line error ``accepts()`` gave for that case (a raise, a
    crash, a hang, an exit). A plug-in that cannot be loaded is a :class:`PluginError`."""
    timeout = load_timeout() if timeout is None else timeout
    lifeline.sweep(tempfile.gettempdir(), _MANIFEST_PREFIX)  # those of harness processes killed before
    fd, cases_file = tempfile.mkstemp(prefix=lifeline.owned_prefix(_MANIFEST_PREFIX), suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for c in cases:
                f.write(c.to_json() + "\n")
        return _take(spec, list(cases), cases_file, timeout)
    finally:
        os.unlink(cases_file)


def _take(spec: str, cases: list[Any], cases_file: str, timeout: float
          ) -> tuple[list[dict[str, Any]], dict[tuple[str, str], bool | str]]:
    subjects: list[dict[str, Any]] | None = None
    accepts: dict[tuple[str, str], bool | str] = {}
    start, deaths = 0, 0
    while True:
        child = _Child(spec, cases_file, start)
        try:
            state, value = child.next(timeout)
            if state != "answer" or not isinstance(value, dict) or not ("subjects" in value or "error" in value):
                raise PluginError(f"subject-plugin={spec!r}: loading it {_why(state, value, child, timeout)}")
            if "error" in value:
                raise PluginError(f"subject-plugin={spec!r}: {value['error']}")
            subjects = _checked(spec, value["subjects"])
            order = [(c.id, s["name"]) for c in cases for s in subjects]
            while True:
                state, value = child.next(timeout)
                if state == "answer" and isinstance(value, dict) and value.get("done"):
                    return subjects, accepts
                if state == "answer" and isinstance(value, dict) and value.get("i") == start and \
                        isinstance(value.get("accepts"), (bool, str)):
                    case_id, name = order[start]
                    accepts[(name, case_id)] = value["accepts"]
                    start += 1
                    continue
                # The child died, hung or garbled its answer on item ``start``: that case's error; go on after it.
                if start >= len(order):
                    return subjects, accepts
                why = _why(state, value, child, timeout) if state != "answer" else "wrote a malformed answer"
                deaths += 1
                case_id, name = order[start]
                accepts[(name, case_id)] = f"accepts() {why}"
                start += 1
                # A hang costs the whole timeout each time it is asked again: one is enough (a crash is cheap,
                # so a plug-in that dies on some cases only still gets its other cases asked).
                if deaths >= _MAX_RESTARTS or state == "timeout":
                    failed = "it hung once" if state == "timeout" else f"it failed {deaths} times"
                    for case_id, name in order[start:]:
                        accepts[(name, case_id)] = f"accepts() not asked: {failed} ({why})"
                    return subjects, accepts
                break
        finally:
            child.kill()


def _checked(spec: str, data: Any) -> list[dict[str, Any]]:
    """The child's subject list checked again here (plain data only; the child is not trusted)."""
    from harness.core.vocabulary import CASE_FAMILIES, ROLES

    ok = isinstance(data, list) and data and all(
        isinstance(d, dict) and isinstance(d.get("name"), str) and d.get("family") in CASE_FAMILIES and
        d.get("role") in ROLES and (d.get("oracle") is None or isinstance(d.get("oracle"), str)) and
        isinstance(d.get("devices"), list) and all(x in ("cpu", "gpu") for x in d["devices"]) and
        isinstance(d.get("declared"), dict) for d in data)
    if not ok:
        raise PluginError(f"subject-plugin={spec!r}: its manifest is malformed")
    return data


if __name__ == "__main__":
    lifeline.adopt()  # dies with the process that started it
    _child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
