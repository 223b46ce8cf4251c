"""``harness bisect``: which package, and which release of it, changes a case's bits.

Given a case, a subject and two environments that disagree (requirement pins ``--good numpy==2.2.6 --bad
numpy==2.3.0``, or two fingerprints: a baseline's or a run's ``environment.json``, an audit file), it

1. probes both ends (each pin set installed in a throwaway environment, :mod:`harness.verbs.bisect_envs`; the
   case run in a probe process of that environment, :mod:`harness.verbs.bisect_probe`, and its output digests
   compared): if they agree there is nothing to bisect;
2. changes one package at a time from the good end to the bad one's version: the first whose change alone
   changes the bits is the package;
3. bisects that package's released versions between the two pins (the index's, or the wheels in
   ``--find-links``) and names the first that changes the bits, in one line::

       numpy 2.3.0 changes chainer.NStepLSTM grad.ws.0.0 (first at 2.3.0; 2.2.6 agrees)

A version that cannot be installed is skipped, said, and the bisection goes on among the others. Every probe's
result is a JSON line of a log in the cache directory (one log per question); a rerun reads it and probes only
what it lacks. The environments are made in the cache directory and removed after each probe.
Exit codes: 0 the two ends agree, 1 a package named, 2 bad input or an end that cannot be installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.core.contexts import get_context
from harness.core.errors import HarnessError, InvalidArgument
from harness.verbs import bisect_envs as envs

__all__ = ["BisectOptions", "bisect", "parse_pins", "pins_from_environment", "default_cache", "answer_line"]

#: Packages of the harness itself (its tables, its tests), never what a subject's bits depend on.
_HARNESS_OWN = frozenset({"pandas", "hypothesis", "pytest", "threadpoolctl"})


def default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "harness", "bisect")


@dataclass(frozen=True)
class BisectOptions:
    """One bisection: the case and subject, the two ends as pins, and where environments come from."""

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
    timeout: float = 600.0                   # seconds per probe run
    quiet: bool = False


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
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"environment={path!r}: not a fingerprint, run directory or audit file ({exc})")
    fp = data.get("environment", data) if isinstance(data, dict) else {}
    packages = fp.get("packages") if isinstance(fp, dict) else None
    if not isinstance(packages, dict):
        raise InvalidArgument(f"environment={path!r}: no 'packages' in its fingerprint")
    return {canonicalize_name(k): str(v) for k, v in packages.items()
            if v and canonicalize_name(k) not in _HARNESS_OWN}


def answer_line(package: str, first: str, last_good: str, subject: str, tensor: str,
                skipped: Sequence[str] = ()) -> str:
    """The one-line answer."""
    line = f"{package} {first} changes {subject} {tensor} (first at {first}; {last_good} agrees)"
    if skipped:
        line += f"; not installable, so not probed between them: {', '.join(skipped)}"
    return line


class _Log:
    """The JSON-lines log of one question: each probe's pins and result; read back on a rerun."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut short by an interrupted run
                    self.done[_key(rec["pins"])] = rec

    def add(self, rec: dict[str, Any]) -> None:
        self.done[_key(rec["pins"])] = rec
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")


def _key(pins: Mapping[str, str]) -> str:
    return " ".join(f"{n}=={v}" for n, v in sorted(pins.items()))


def _question(opts: BisectOptions) -> str:
    """What identifies one bisection (its log's name): the case's bytes, subject, context, plug-ins, ends."""
    with open(opts.case, "rb") as fh:
        case = fh.read()
    text = json.dumps([hashlib.sha256(case).hexdigest(), opts.case_id, opts.subject, opts.context,
                       list(opts.plugins), _key(opts.good), _key(opts.bad), sys.executable])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _digests(rec: Mapping[str, Any]) -> list[tuple[str, str]] | str:
    """A probe's result as compared: its digests in output order, or its error."""
    r = rec["result"]
    return [tuple(d) for d in r["digests"]] if r.get("digests") is not None else f"{r['status']}: {r.get('error')}"


def _first_difference(a: Any, b: Any) -> str:
    """The first tensor whose digest differs (in output order), or what differs."""
    if isinstance(a, list) and isinstance(b, list):
        da = dict(a)
        for name, d in b:
            if da.get(name) != d:
                return name
        return next((n for n, _ in a if n not in dict(b)), "outputs")
    return "error" if isinstance(b, str) else "outputs"


class _Prober:
    def __init__(self, opts: BisectOptions, say: Callable[[str], None]) -> None:
        self.opts, self.say = opts, say
        self.inst = envs.installer(opts.installer, opts.find_links, opts.no_index)
        self.cache = os.path.abspath(opts.cache or default_cache())
        os.makedirs(os.path.join(self.cache, "logs"), exist_ok=True)
        self.log = _Log(os.path.join(self.cache, "logs", f"{_question(opts)}.jsonl"))
        self.n = 0
        self.reference: Any = None  # the good end's digests, once probed: each later probe is said against them

    def __call__(self, pins: Mapping[str, str], what: str) -> dict[str, Any] | None:
        """The probe of ``pins`` (from the log where it ran before); None where they cannot be installed."""
        self.n += 1
        key = _key(pins)
        rec = self.log.done.get(key)
        if rec is not None and not str(rec.get("skipped", "")).startswith("the probe did not run"):
            # (a probe that did not run the case, its plug-in since mended perhaps, runs again)
            self.say(f"probe {self.n}: {what}: {key}: {self.verdict(rec)} (from the log)")
            return None if rec.get("skipped") else rec
        t0 = time.perf_counter()
        env_dir = os.path.join(self.cache, "envs", hashlib.sha256(key.encode()).hexdigest()[:12])
        try:
            python = envs.make_env(env_dir, self.inst)
            envs.install(python, pins, self.inst)
            result = envs.run_probe(python, {"case": os.path.abspath(self.opts.case), "case_id": self.opts.case_id,
                                             "subject": self.opts.subject, "context": self.opts.context,
                                             "plugins": list(self.opts.plugins), "packages": sorted(pins)},
                                    self.opts.timeout, env=dict(get_context(self.opts.context).env))
        except envs.InstallFailed as exc:
            rec = {"pins": dict(pins), "skipped": str(exc)}
        else:
            got = result.get("versions", {})
            wrong = {n: got.get(n) for n, v in pins.items() if _norm(got.get(n)) != _norm(v)}
            rec = {"pins": dict(pins), "result": result}
            if result.get("status") in ("crashed", "skipped", "timeout"):
                # the probe did not run the case (a plug-in or subject it cannot load, a run past the timeout):
                # nothing is known of these bits, as where the pins cannot be installed
                rec = {"pins": dict(pins), "skipped": f"the probe did not run the case: {result.get('error')}"}
            elif wrong:
                rec = {"pins": dict(pins), "skipped": f"installed, but the probe imported {wrong}"}
        finally:
            shutil.rmtree(env_dir, ignore_errors=True)
        self.log.add(rec)
        self.say(f"probe {self.n}: {what}: {key}: {self.verdict(rec)} ({time.perf_counter() - t0:.1f} s)")
        return None if rec.get("skipped") else rec

    def verdict(self, rec: Mapping[str, Any]) -> str:
        """What a probe found: not installable, or its digests (the first probe's), or whether they agree with
        the good end's."""
        if rec.get("skipped"):
            return f"cannot be {'run' if 'probe did not run' in rec['skipped'] else 'installed'}, skipped: " \
                f"{rec['skipped']}"
        d = _digests(rec)
        if self.reference is None:
            return f"{len(d)} tensor digest(s)" if isinstance(d, list) else d
        if d == self.reference:
            return "agrees with the good end"
        return f"differs from the good end (first: {_first_difference(self.reference, d)})" + \
            (f": {d}" if isinstance(d, str) else "")

    def clean(self) -> None:
        shutil.rmtree(os.path.join(self.cache, "envs"), ignore_errors=True)


def _norm(v: Any) -> str:
    try:
        return str(Version(str(v)))
    except InvalidVersion:
        return str(v)


def bisect(opts: BisectOptions, say: Callable[[str], None] | None = None) -> int:
    """Name the package and the first release of it that changes the case's bits (module docstring)."""
    for n in set(opts.good) | set(opts.bad):
        if n not in opts.good or n not in opts.bad:
            raise InvalidArgument(f"--good/--bad: {n} is pinned at one end only ({opts.good.get(n) or opts.bad[n]});"
                                  " pin it at both")
    differ = [n for n in opts.good if _norm(opts.good[n]) != _norm(opts.bad[n])]
    if not differ:
        raise InvalidArgument(f"--good/--bad: the two ends pin the same versions ({_key(opts.good)})")
    if not os.path.isfile(opts.case):
        raise InvalidArgument(f"case={opts.case!r}: no such case file")
    context = get_context(opts.context)  # an unknown one is refused here, in one line
    if not context.applies_to("cpu"):
        raise InvalidArgument(f"context={opts.context!r}: applies only to {', '.join(context.devices)}; "
                              "a probe runs on the CPU")
    out = say or (lambda s: None if opts.quiet else print(f"bisect: {s}", file=sys.stderr, flush=True))
    probe = _Prober(opts, out)
    good_pins = {n: opts.good[n] for n in differ}
    bad_pins = {n: opts.bad[n] for n in differ}
    out(f"{opts.subject} on {opts.case} in context {opts.context}; {len(differ)} package(s) differ: "
        + ", ".join(f"{n} {opts.good[n]} -> {opts.bad[n]}" for n in differ) + f"; environments in {probe.cache}")
    try:
        good = probe(good_pins, "good end")
        probe.reference = None if good is None else _digests(good)
        bad = probe(bad_pins, "bad end")
        if good is None or bad is None:
            raise HarnessError(f"bisect: the {'good' if good is None else 'bad'} end cannot be installed or run: "
                               f"{probe.log.done[_key(good_pins if good is None else bad_pins)]['skipped']}")
        g = _digests(good)
        if _digests(bad) == g:
            print(f"the two ends agree on {opts.subject} for this case: nothing to bisect")
            return 0
        package, changed = (differ[0], bad) if len(differ) == 1 else (None, None)
        for n in differ if len(differ) > 1 else ():
            rec = probe({**good_pins, n: opts.bad[n]}, f"{n} alone at the bad end's version")
            if rec is not None and _digests(rec) != g:
                package, changed = n, rec
                break
        if package is None or changed is None:
            print(f"no single package changes the bits alone ({', '.join(differ)}): they change them together")
            return 1
        return _versions(opts, probe, good_pins, package, g, changed)
    finally:
        probe.clean()


def _versions(opts: BisectOptions, probe: _Prober, good_pins: Mapping[str, str], package: str, g: Any,
              changed: Mapping[str, Any]) -> int:
    """Bisect ``package``'s released versions between the two ends (the others at the good end's)."""
    lo_v, hi_v = Version(opts.good[package]), Version(opts.bad[package])
    up = lo_v < hi_v
    inner = [v for v in envs.released_versions(package, probe.inst)
             if (lo_v < v < hi_v if up else hi_v < v < lo_v) and (not v.is_prerelease or lo_v.is_prerelease
                                                                  or hi_v.is_prerelease)]
    chain = [opts.good[package], *(str(v) for v in (inner if up else reversed(inner))), opts.bad[package]]
    probe.say(f"{package}: {len(chain) - 2} release(s) between {chain[0]} and {chain[-1]}")
    lo, hi, skipped, last = 0, len(chain) - 1, set(), changed
    while True:
        todo = [i for i in range(lo + 1, hi) if i not in skipped]
        if not todo:
            break
        mid = min(todo, key=lambda i: (abs(i - (lo + hi) / 2), i))
        rec = probe({**good_pins, package: chain[mid]}, f"{package} {chain[mid]}")
        if rec is None:
            skipped.add(mid)
        elif _digests(rec) == g:
            lo = mid
        else:
            hi, last = mid, rec
    tensor = _first_difference(g, _digests(last))
    print(answer_line(package, chain[hi], chain[lo], opts.subject, tensor,
                      [chain[i] for i in sorted(skipped) if lo < i < hi]))
    return 1
