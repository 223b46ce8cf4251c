"""The bisection engine of ``harness bisect``: which package, and which release of it, changes a case's bits.

Given a case, a subject and two ends that disagree (requirement pins ``numpy==2.2.6`` against ``numpy==2.4.6``),
it writes the exported reproducer once (:func:`harness.upstream.reproducer.outputs_script`), then

1. probes both ends: each pin set installed in a throwaway environment (:mod:`harness.upstream.bisect_envs`),
   the script run there as ``python -I repro.py --save-outputs probe.npz``, and the saved tensors compared bit
   for bit, tensor by tensor (an ``__error__`` entry is an outcome like any other). Ends that agree: nothing to
   bisect (exit 0); an error at both ends, or an end that cannot run, is exit 2 with its cause's line;
2. changes one package at a time from the good end to the bad one's version: the first whose change alone
   changes the bits is the package;
3. bisects that package's released versions between the two pins and names the first that changes the bits,
   with the conditions it holds fixed (:mod:`harness.upstream.bisect_conditions`)::

       numpy 2.4.2 changes chainer.NStepLSTM hy (first at 2.4.2; 2.4.1 agrees) on OpenBLAS SkylakeX kernels,
       2 threads, AMD EPYC

A version that cannot be installed or run is skipped, said, and the bisection goes on among the others.

The cache directory is bisect's own: ``logs/`` holds one JSON-lines log per question (the script, the case, the
ends and the conditions make its name), a line written only once a probe has finished; a rerun takes the
outcomes it finds there and probes again whatever failed (its cause may be fixed). A damaged line is dropped
and said. ``envs/`` holds one folder per run, ``run-<pid>-...`` with a marker file; a folder whose marked owner
is gone (a killed run) is removed by the next run; nothing there without bisect's marker is touched.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.core import lifeline
from harness.core.errors import HarnessError, InvalidArgument
from harness.upstream import bisect_conditions as conditions
from harness.upstream import bisect_envs as envs
from harness.upstream.bisect_outcomes import Log, Outcome, first_difference, read_outputs

__all__ = ["Bisection", "bisect", "check_ends", "parse_pins", "pins_from_environment", "default_cache", "answer_line",
           "MARKER", "RUN_PREFIX", "sweep_runs"]

#: Packages of the harness itself (its tables, its tests), never what a subject's bits depend on.
_HARNESS_OWN = frozenset({"pandas", "hypothesis", "pytest", "threadpoolctl"})
#: The file that marks a folder under ``envs/`` as made by bisect, and the name its folders start with.
MARKER = ".harness-bisect-run"
RUN_PREFIX = "run-"

#: Writes the script a probe runs: ``(case, subject, out, case_id=..., plugins=...)``, an object with ``script``
#: and ``data`` paths (:func:`harness.upstream.reproducer.outputs_script`).
Writer = Callable[..., Any]


def default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "harness", "bisect")


@dataclass(frozen=True)
class Bisection:
    """One question: the case and subject, the two ends as pins, where environments come from, the pins of the
    conditions the user adds (``env``)."""

    case: str
    subject: str
    good: Mapping[str, str]                  # canonical package name -> version, the end that agrees
    bad: Mapping[str, str]                   # the end whose bits differ
    case_id: str = ""
    context: str = "default"
    plugins: tuple[str, ...] = ()
    cache: str = ""                          # empty: :func:`default_cache`
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    installer: str = "auto"                  # auto (uv where installed), uv, pip
    timeout: float = 600.0                   # seconds per probe's script
    env: tuple[tuple[str, str], ...] = ()    # the user's pins of the conditions


def parse_pins(items: Sequence[str], what: str) -> dict[str, str]:
    """``["numpy==2.2.6", "chainer==7.8.1 espnet==202511"]`` -> ``{"numpy": "2.2.6", ...}``;
    :class:`InvalidArgument` naming ``what`` and the item otherwise."""
    out: dict[str, str] = {}
    for item in items:
        for pin in item.replace(",", " ").split():
            name, sep, version = pin.partition("==")
            try:
                Version(version)
            except InvalidVersion:
                sep = ""
            if not sep or not name.strip():
                raise InvalidArgument(f"{what}={pin!r}: a pin is NAME==VERSION (e.g. numpy==2.2.6)")
            out[canonicalize_name(name)] = version
    return out


def pins_from_environment(path: str) -> dict[str, str]:
    """The package versions of a fingerprint: a run or baseline directory (its ``environment.json``), an
    ``environment.json``, or an audit file (its ``environment``). The harness's own packages are left out."""
    file = os.path.join(path, "environment.json") if os.path.isdir(path) else path
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"environment={path!r}: not a fingerprint, run directory or audit file ({exc})")
    fp = data.get("environment", data) if isinstance(data, dict) else {}
    packages = fp.get("packages") if isinstance(fp, dict) else None
    if not isinstance(packages, dict):
        raise InvalidArgument(f"environment={path!r}: no 'packages' in its fingerprint")
    return {canonicalize_name(k): str(v) for k, v in packages.items()
            if v and canonicalize_name(k) not in _HARNESS_OWN}


def answer_line(package: str, first: str, last_good: str, subject: str, tensor: str,
                skipped: Sequence[str] = (), where: str = "") -> str:
    """The one-line answer, with the conditions it holds (``where``)."""
    line = f"{package} {first} changes {subject} {tensor} (first at {first}; {last_good} agrees)"
    line += f" {where}" if where else ""
    if skipped:
        line += f"; not installable or not runnable, so not probed between them: {', '.join(skipped)}"
    return line


def _key(pins: Mapping[str, str]) -> str:
    return " ".join(f"{n}=={v}" for n, v in sorted(pins.items()))


def _norm(v: Any) -> str:
    try:
        return str(Version(str(v)))
    except InvalidVersion:
        return str(v)


# ---- the cache ------------------------------------------------------------------------------------------
def _open_cache(path: str) -> str:
    """The cache directory, its ``logs/`` and ``envs/`` made and written to once; one line where it cannot be
    (a file, a read-only folder)."""
    path = os.path.abspath(path or default_cache())
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidArgument(f"cache={path!r} is not a directory")
    try:
        for sub in ("logs", "envs"):
            os.makedirs(os.path.join(path, sub), exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=os.path.join(path, sub), prefix=".write-check-")
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise InvalidArgument(f"cache={path!r}: cannot write there ({exc.strerror or exc}: "
                              f"{exc.filename or path})") from None
    return path


def sweep_runs(envs_dir: str) -> list[str]:
    """Remove the run folders of ``envs_dir`` that carry bisect's marker and whose owner process is gone (a run
    killed before it could clean up); the names removed. Nothing without the marker is touched."""
    gone = []
    for name in sorted(os.listdir(envs_dir)):
        path = os.path.join(envs_dir, name)
        owner = name[len(RUN_PREFIX):].split("-", 1)[0]
        if not (name.startswith(RUN_PREFIX) and owner.isdigit() and os.path.isdir(path)
                and not os.path.islink(path) and os.path.isfile(os.path.join(path, MARKER))):
            continue
        if int(owner) != os.getpid() and not lifeline.pid_alive(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
            gone.append(name)
    return gone


def _make_run_dir(envs_dir: str) -> str:
    path = tempfile.mkdtemp(dir=envs_dir, prefix=f"{RUN_PREFIX}{os.getpid()}-")
    with open(os.path.join(path, MARKER), "w", encoding="utf-8") as fh:
        fh.write(f"made by harness bisect, process {os.getpid()}: removed when that process is gone\n")
    return path


def _remove_run_dir(path: str) -> None:
    if os.path.isfile(os.path.join(path, MARKER)):
        shutil.rmtree(path, ignore_errors=True)


def _default_writer() -> Writer:
    try:
        return importlib.import_module("harness.upstream.reproducer").outputs_script
    except (ImportError, AttributeError) as exc:
        raise HarnessError(f"bisect: the exported reproducer is not available here ({exc})") from None


def _file_digest(path: str | None, run_dir: str) -> str:
    """A digest of a written file, the run folder's own path left out (it differs from run to run)."""
    if not path:
        return ""
    with open(path, "rb") as fh:
        data = fh.read()
    return hashlib.sha256(data.replace(run_dir.encode(), b"<run>")).hexdigest()


# ---- the probes -----------------------------------------------------------------------------------------
class _Prober:
    """Runs (or reads from the log) the probe of one pin set, and says each."""

    def __init__(self, q: Bisection, say: Callable[[str], None], inst: envs.Installer,
                 cond: conditions.Conditions, run_dir: str, script: str, log: Log) -> None:
        self.q, self.say, self.inst, self.cond = q, say, inst, cond
        self.run_dir, self.script, self.log = run_dir, script, log
        self.n = 0
        self.reference: Outcome | None = None  # the good end's outcome: each later probe is said against it
        self.failed: dict[str, str] = {}       # pins -> why they cannot be probed

    def __call__(self, pins: Mapping[str, str], what: str) -> Outcome | None:
        """The outcome of ``pins`` (from the log where it ran before); None where they cannot be probed."""
        self.n += 1
        key = _key(pins)
        got = self.log.get(key)
        if got is not None:
            self.say(f"probe {self.n}: {what}: {key}: {self.verdict(got)} (from the log)")
            return got
        t0 = time.perf_counter()
        env_dir = os.path.join(self.run_dir, "env-" + hashlib.sha256(key.encode()).hexdigest()[:12])
        try:
            out = self._probe(pins, env_dir)
        except envs.InstallFailed as exc:
            self.failed[key] = str(exc)
            self.log.add({"pins": dict(pins), "failed": str(exc)})
            self.say(f"probe {self.n}: {what}: {key}: cannot be probed, skipped: {exc} "
                     f"({time.perf_counter() - t0:.1f} s)")
            return None
        finally:
            shutil.rmtree(env_dir, ignore_errors=True)
        self.log.add({"pins": dict(pins), "outcome": out})
        self.say(f"probe {self.n}: {what}: {key}: {self.verdict(out)} ({time.perf_counter() - t0:.1f} s)")
        return out

    def _probe(self, pins: Mapping[str, str], env_dir: str) -> Outcome:
        python = envs.make_env(env_dir, self.inst)
        envs.install(python, pins, self.inst)
        env = self.cond.probe_env()
        report = conditions.report_of(python, env, sorted(pins))
        wrong = {n: report["versions"].get(n) for n, v in pins.items()
                 if _norm(report["versions"].get(n)) != _norm(v)}
        if wrong:
            raise envs.InstallFailed(f"installed, but the probe's Python sees {wrong}")
        broken = conditions.held(report, self.cond)
        if broken:
            raise envs.InstallFailed(f"the conditions do not hold there: {broken}")
        npz = os.path.join(env_dir, "probe.npz")
        r = lifeline.run_guarded([python, "-I", self.script, "--save-outputs", npz], self.q.timeout, env=env,
                     cwd=os.path.dirname(self.script))
        if r.code is None:
            raise envs.InstallFailed(f"the script ran past {self.q.timeout:g} s")
        if r.code == 2:  # the protocol's "cannot run here": its last line says why
            last = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
            raise envs.InstallFailed(last[-1][:400] if last else "the script exited 2 (cannot run here)")
        if r.code != 0:
            raise envs.InstallFailed(f"the script exited {r.code}: {envs.cause_line(r.stderr, 'no output')}")
        return read_outputs(npz)

    def verdict(self, out: Outcome) -> str:
        """What a probe found: its outcome (the first probe's), or whether it agrees with the good end's."""
        if self.reference is None:
            return f"{len(out)} tensor(s)" if isinstance(out, list) else f"raises {out}"
        if out == self.reference:
            return "agrees with the good end"
        return f"differs from the good end (first: {first_difference(self.reference, out)})" + \
            (f": raises {out}" if isinstance(out, str) else "")


def check_ends(good: Mapping[str, str], bad: Mapping[str, str]) -> list[str]:
    """The packages whose versions differ between the ends; one line where a package is pinned at one end only
    or none differs."""
    for n in sorted(set(good) | set(bad)):
        if n not in good or n not in bad:
            raise InvalidArgument(f"--good/--bad: {n} is pinned at one end only ({good.get(n) or bad[n]});"
                                  " pin it at both")
    differ = [n for n in good if _norm(good[n]) != _norm(bad[n])]  # in the order the user gave
    if not differ:
        raise InvalidArgument(f"--good/--bad: the two ends pin the same versions ({_key(good)})")
    return differ


def bisect(q: Bisection, say: Callable[[str], None], write_script: Writer | None = None) -> int:
    """Name the package and the first release of it that changes the case's bits (module docstring); the exit
    code. The case and subject are the caller's to check first; everything else is checked here before any
    environment is made."""
    differ = check_ends(q.good, q.bad)
    conditions.context_env(q.context)  # refused in one line where a probe cannot set it up
    inst = envs.installer(q.installer, q.find_links, q.no_index)
    cache = _open_cache(q.cache)
    for name in sweep_runs(os.path.join(cache, "envs")):
        say(f"removed {name}, left by a bisect that did not finish")
    cond = conditions.measure(q.context, q.env)
    write = write_script or _default_writer()
    run_dir = _make_run_dir(os.path.join(cache, "envs"))
    try:
        written = write(q.case, q.subject, os.path.join(run_dir, "repro.py"), case_id=q.case_id,
                        plugins=tuple(q.plugins))
        with open(q.case, "rb") as fh:
            case_digest = hashlib.sha256(fh.read()).hexdigest()
        question = hashlib.sha256(json.dumps([
            _file_digest(written.script, run_dir), _file_digest(getattr(written, "data", None), run_dir),
            case_digest, q.case_id, q.subject, q.context, list(q.plugins), _key(q.good), _key(q.bad), cond.key(),
            sys.executable, inst.tool, list(inst.find_links), inst.no_index]).encode()).hexdigest()[:16]
        log = Log(os.path.join(cache, "logs", f"{question}.jsonl"), say)
        probe = _Prober(q, say, inst, cond, run_dir, os.path.abspath(written.script), log)
        say(f"{q.subject} on {q.case} in context {q.context}; {len(differ)} package(s) differ: "
            + ", ".join(f"{n} {q.good[n]} -> {q.bad[n]}" for n in differ) + f"; {cond.words()}; "
            f"environments in {run_dir}")
        return _search(q, probe, differ, cond)
    finally:
        _remove_run_dir(run_dir)


def _end_failed(probe: _Prober, end: str, pins: Mapping[str, str]) -> int:
    print(f"harness: error: bisect: the {end} end ({_key(pins)}) cannot be probed: "
          f"{probe.failed.get(_key(pins), 'its outcome is missing')}", file=sys.stderr)
    return 2


def _search(q: Bisection, probe: _Prober, differ: list[str], cond: conditions.Conditions) -> int:
    good_pins = {n: q.good[n] for n in differ}
    bad_pins = {n: q.bad[n] for n in differ}
    good = probe(good_pins, "good end")
    if good is None:
        return _end_failed(probe, "good", good_pins)
    probe.reference = good
    bad = probe(bad_pins, "bad end")
    if bad is None:
        return _end_failed(probe, "bad", bad_pins)
    if isinstance(good, str) and isinstance(bad, str):
        print(f"harness: error: bisect: both ends fail: good ({_key(good_pins)}): {good}; bad ({_key(bad_pins)}):"
              f" {bad}", file=sys.stderr)
        return 2
    if bad == good:
        print(f"the two ends agree on {q.subject} for this case {cond.words()}: nothing to bisect")
        return 0
    package: str | None = differ[0] if len(differ) == 1 else None
    changed: Outcome | None = bad if package else None
    for n in differ if len(differ) > 1 else ():
        out = probe({**good_pins, n: q.bad[n]}, f"{n} alone at the bad end's version")
        if out is not None and out != good:
            package, changed = n, out
            break
    if package is None or changed is None:
        print(f"no single package changes the bits alone ({', '.join(differ)}): they change them together "
              f"{cond.words()}")
        return 1
    return _versions(q, probe, good_pins, package, good, changed, cond)


def _versions(q: Bisection, probe: _Prober, good_pins: Mapping[str, str], package: str, good: Outcome,
              changed: Outcome, cond: conditions.Conditions) -> int:
    """Bisect ``package``'s released versions between the two ends (the others at the good end's)."""
    lo_v, hi_v = Version(q.good[package]), Version(q.bad[package])
    up = lo_v < hi_v
    inner = [v for v in envs.released_versions(package, probe.inst)
             if (lo_v < v < hi_v if up else hi_v < v < lo_v) and (not v.is_prerelease or lo_v.is_prerelease
                                                                  or hi_v.is_prerelease)]
    chain = [q.good[package], *(str(v) for v in (inner if up else reversed(inner))), q.bad[package]]
    probe.say(f"{package}: {len(chain) - 2} release(s) between {chain[0]} and {chain[-1]}")
    lo, hi, skipped, last = 0, len(chain) - 1, set(), changed
    while True:
        todo = [i for i in range(lo + 1, hi) if i not in skipped]
        if not todo:
            break
        mid = min(todo, key=lambda i: (abs(i - (lo + hi) / 2), i))
        out = probe({**good_pins, package: chain[mid]}, f"{package} {chain[mid]}")
        if out is None:
            skipped.add(mid)
        elif out == good:
            lo = mid
        else:
            hi, last = mid, out
    print(answer_line(package, chain[hi], chain[lo], q.subject, first_difference(good, last),
                      [chain[i] for i in sorted(skipped) if lo < i < hi], cond.words()))
    return 1
