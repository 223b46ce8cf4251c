"""The text of an exported reproducer: a script a maintainer reads in one screen.

:func:`script_text` assembles, in the order a maintainer writes a bug script: a docstring (the title, what
happens, the conditions it holds under, the exit codes), the imports, one labelled block that lets Chainer
7.8.1 import on NumPy 2, the inputs (a seed and a few numbers, or the data file beside the script), the one
call (:mod:`harness.upstream.script_calls`), and the one check of the claim (:class:`Check`) with a short
printed account. Every exit is honest: 1 only when the claim is observed, 0 only when the same call ran and it
is not, 2 for anything that prevents a judgement (an exception the claim does not name, an import missing, a
context that cannot be set up here). ``--save-outputs OUT.npz`` runs the call once and writes its outputs (or
its error as ``__error__``): the one protocol a caller (the exporter's own check, bisect's probe, the script's
fresh processes) uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from harness.upstream.script_calls import RenderedCall

__all__ = ["Check", "Inputs", "script_text", "lines_of_code", "observed_text", "SHIM_LABEL", "REPRODUCED", "OBSERVED"]

SHIM_LABEL = "Chainer 7.8.1 imports names that NumPy 2, Python 3.12 and setuptools >= 80 dropped"


@dataclass(frozen=True)
class Check:
    """The one claim a script checks.

    ``kind``: ``error`` (``error`` = (type name, phase)), ``bad_input`` (``allowed`` error names and phases,
    ``no_error_ok``), ``repeats`` (``count`` runs), ``processes`` (``count`` fresh processes), ``contexts``
    (``contexts`` = two (name, environment) pairs, ``threads``: the cores they need), ``devices`` (two
    Chainer device specifiers), ``relation`` (``members``: (label, data prefix) and ``pairs``: (label, base
    tensor, base rows or None, member tensor)), ``tolerance`` (``tolerance``: tensor -> (atol, rtol,
    normwise), expected values ``expected.<tensor>`` in the data), ``bits`` (reference ``bits.<tensor>`` in
    the data, ``reference``: what they are). ``tensors``: the outputs the claim is about (empty: all).
    ``note``: the contract's reason where the behaviour is allowed (a behaviour note, not a defect)."""

    kind: str
    tensors: tuple[str, ...] = ()
    error: tuple[str, str] = ("", "")
    allowed: Mapping[str, Sequence[str]] = field(default_factory=dict)
    no_error_ok: bool = False
    count: int = 0
    contexts: tuple[tuple[str, Mapping[str, str]], ...] = ()
    threads: int = 1
    devices: tuple[str, ...] = ()
    members: tuple[tuple[str, str], ...] = ()
    pairs: tuple[tuple[str, str, tuple[int, ...] | None, int, str], ...] = ()
    tolerance: Mapping[str, tuple[float, float, bool]] = field(default_factory=dict)
    reference: str = ""
    note: str = ""
    #: a training's steps (``contexts`` only): the runs are compared step by step, the first differing one named
    steps: int = 0


@dataclass(frozen=True)
class Inputs:
    """How the script gets its inputs: ``data`` (the file name beside the script, every array in it), or a
    seed and a few numbers (``literal``: small integer arrays written out; ``drawn``: name -> (shape, dtype)
    drawn from ``seed``)."""

    data: str = ""
    seed: int = 0
    literal: Mapping[str, np.ndarray] = field(default_factory=dict)
    drawn: Mapping[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)


def _docstring(title: str, what: str, conditions: str, note: str, data: str) -> list[str]:
    lines = ['"""' + title, "", *what.splitlines()]
    if note:
        lines += ["", "A behaviour note, not a defect report: " + note]
    lines += ["", f"Holds under: {conditions}."]
    if data:
        lines.append(f"Inputs: {data}, beside this script (the arrays the case holds, bit for bit).")
    lines += ["Exit 1: observed; 0: the call ran and it was not observed; 2: cannot tell here (said why).", '"""']
    return lines


_PRELUDE = '''import argparse, importlib, os, platform, sys, traceback, types  # noqa: E401


def cannot_tell(kind, value, tb):  # an exception not handled below: no judgement (exit 2)
    traceback.print_exception(kind, value, tb)
    os._exit(print(f"CANNOT TELL: {kind.__name__} before the claim could be checked", flush=True) or 2)


sys.excepthook = cannot_tell
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--save-outputs", metavar="NPZ", help="run the call once; write its outputs or error to NPZ")
args = parser.parse_args()
PIN
import numpy as np  # noqa: E402

# ---- SHIM: add what is missing ----
# numpy.sctypes is read by chainer/functions/array/as_strided.py, the two modules by chainer/_environment_check.py
np.sctypes = getattr(np, "sctypes", {"int": [np.int32, np.int64], "float": [np.float16, np.float32, np.float64]})
for m, kw in (("numpy.distutils.system_info", {"get_info": lambda *a, **k: {}}), ("pkg_resources", {"require": list})):
    try: importlib.import_module(m)  # noqa: E701
    except ImportError: sys.modules[m] = types.SimpleNamespace(**kw)  # noqa: E701
import chainer, chainer.functions as F, chainer.links as L  # noqa: E401, E402
'''.replace("SHIM", SHIM_LABEL)


def _versions(imports: Sequence[str], devices: Sequence[str]) -> list[str]:
    parts = ['f"python {platform.python_version()}, numpy {np.__version__}, chainer {chainer.__version__}"']
    if any("espnet" in i for i in imports):
        parts.append('f", espnet {importlib.metadata.version(\'espnet\')}"')
    if any(d.startswith("@cupy") for d in devices):
        parts.append('f", cupy {importlib.import_module(\'cupy\').__version__}"')
    out = ["import importlib.metadata  # noqa: E402"] if any("espnet" in i for i in imports) else []
    return out + [f"print(\"versions:\", {' + '.join(parts)})"]


def _inputs(inputs: Inputs) -> list[str]:
    if not (inputs.data or inputs.literal or inputs.drawn):
        return ["d = {}  # no arrays: the call draws its own from the case's seed"]
    if inputs.data:
        return [f"d = dict(np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), {inputs.data!r})))"]
    lines = [f"rng = np.random.default_rng({inputs.seed})", "d = {"]
    for k, a in inputs.literal.items():
        lines.append(f"    {k!r}: np.array({a.tolist()!r}, np.{a.dtype.name}),")
    for k, (shape, dtype) in inputs.drawn.items():
        lines.append(f"    {k!r}: rng.standard_normal({tuple(shape)!r}).astype(np.{dtype}),")
    return lines + ["}"]


_SAME = ["same = lambda a, b: a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()  # noqa: E731"]

_SAVE = ["if args.save_outputs:  # one run, its outputs or its error, for a caller that compares them",
         "    try:",
         "        np.savez(args.save_outputs, **run(d))",
         "    except Exception as e:  # noqa: BLE001 - any error is an outcome to compare",
         '        np.savez(args.save_outputs, __error__=np.array(f"{type(e).__name__} in {phase}: {e}"))',
         "    sys.exit(0)"]

_FRESH = ["def outputs_in_fresh_process(env):  # this script's call in a new interpreter, via --save-outputs",
          "    with tempfile.TemporaryDirectory() as tmp:",
          "        p = subprocess.run([sys.executable, *['-I'][:sys.flags.isolated], __file__, '--save-outputs',",
          "                            f'{tmp}/o.npz'], env={**os.environ, **env}, stdout=subprocess.DEVNULL)",
          "        if p.returncode != 0:  # print, then exit 2",
          "            sys.exit(print('CANNOT TELL: a fresh process could not run the call') or 2)",
          "        return dict(np.load(f'{tmp}/o.npz'))"]


#: How a script's line says it observed the claim: a defect's, and an allowed behaviour's (a note).
REPRODUCED = "REPRODUCED: "
OBSERVED = "OBSERVED (allowed: see the docstring): "


def observed_text(line: str) -> str | None:
    """What a script's last line says it observed (after :data:`REPRODUCED` or :data:`OBSERVED`), else None."""
    for said in (REPRODUCED, OBSERVED):
        if line.startswith(said):
            return line[len(said):]
    return None


def _verdict(observed: str, absent: str, note: str) -> list[str]:
    """The two endings: observed (exit 1) and not observed (exit 0)."""
    first = f"{OBSERVED if note else REPRODUCED}{observed}"
    second = f"NOT REPRODUCED: {absent}"
    return [f"    print({_fstr(first)})", "    sys.exit(1)", f"print({_fstr(second)})", "sys.exit(0)"]


def _fstr(text: str) -> str:
    """A string literal, an f-string only where it holds a placeholder."""
    return ("f" if "{" in text else "") + '"' + text.replace('"', "'") + '"'


def _prefixes(names: Sequence[str]) -> tuple[str, ...]:
    """Tensor names as the fewest prefixes: ``grad.xs.0``, ``grad.xs.1`` -> ``grad.xs.``."""
    out = []
    for n in names:
        parts = n.split(".")
        head = next((i for i, p in enumerate(parts) if p.isdigit()), len(parts))
        out.append(".".join(parts[:head]) + "." if head < len(parts) else n)
    return tuple(sorted(set(out)))


def _compare(a: str, b: str, what: str, c: Check) -> list[str]:
    """Compare two output dicts bit for bit over the claim's tensors; exit 1 naming what differs."""
    only = f"k.startswith({_prefixes(c.tensors)!r}) and " if c.tensors else ""
    return [f"differ = [k for k in sorted({a}) if {only}(k not in {b} or not same({a}[k], {b}[k]))]",
            "if differ:", *_verdict(f"{what} differ in {{', '.join(differ)}}", f"{what} give the same bits", c.note)]


def _steps(na: str, nb: str, c: Check) -> list[str]:
    """Two trainings compared step by step (each step's loss and the digest of every parameter after its update):
    the first step that differs, and how far apart the two ended (the last step's parameters, relative L2)."""
    last = c.steps - 1
    return ["first = next((k for k in range(%d) if not all(same(a[f'step.{k}.{t}'], b[f'step.{k}.{t}'])" % c.steps,
            "                                               for t in ('loss', 'digest'))), None)",
            "if first is not None:",
            f"    ends = [(a[k].astype(np.float64), b[k].astype(np.float64)) for k in sorted(a) "
            f"if k.startswith('step.{last}.param.')]",
            "    rel = np.sqrt(sum(((x - y) ** 2).sum() for x, y in ends) / sum((y ** 2).sum() for _, y in ends))",
            *_verdict(f"{na} and {nb} first differ at step {{first}} of {c.steps}; after step {last} the parameters "
                      f"differ by {{rel:.1e}} (relative L2) and the losses are {{a['step.{last}.loss'].item()!r}} and "
                      f"{{b['step.{last}.loss'].item()!r}}",
                      f"{na} and {nb} give the same loss and parameters at each of {c.steps} steps", c.note)]


def _check(c: Check) -> list[str]:
    if c.kind == "error":
        etype, phase = c.error
        return ["try:", "    run(d)", "except Exception as e:",
                f"    if type(e).__name__ != {etype!r} or phase != {phase!r}:",
                "        raise  # another exception than the claimed one: no judgement (exit 2)",
                "    traceback.print_exc()",
                *_verdict(f"{etype} in {phase}: {{e}}", f"the call ran without {etype} in {phase}", c.note)]
    if c.kind == "bad_input":
        allowed = {k: list(v) for k, v in c.allowed.items()}
        return [f"ALLOWED = {allowed!r}  # the errors (and their phases) this input must raise",
                "try:", "    run(d)", "except Exception as e:",
                "    if phase in ALLOWED.get(type(e).__name__, []):",
                "        print(f\"NOT REPRODUCED: it refused the input as it should ({type(e).__name__} in {phase})\")",
                "        sys.exit(0)",
                "    traceback.print_exc()",
                "    print(f\"REPRODUCED: {type(e).__name__} in {phase}, not one of the errors expected\")",
                "    sys.exit(1)",
                *(["print('NOT REPRODUCED: accepted, which the rule allows')", "sys.exit(0)"] if c.no_error_ok else
                  ["print('REPRODUCED: the call accepted the input without an error')", "sys.exit(1)"])]
    if c.kind == "repeats":
        return ["first = run(d)", f"for i in range(1, {c.count}):", "    again = run(d)",
                *[f"    {ln}" for ln in _compare("first", "again", "run {i} and run 0", c)[:2]],
                *[f"    {ln}" for ln in _verdict("run {i} and run 0 differ in {', '.join(differ)}", "", c.note)[:2]],
                f"print(\"NOT REPRODUCED: {c.count} runs gave the same bits\")", "sys.exit(0)"]
    if c.kind == "processes":
        return ["first = outputs_in_fresh_process({})", f"for i in range(1, {c.count}):",
                "    again = outputs_in_fresh_process({})",
                *[f"    {ln}" for ln in _compare("first", "again", "process {i} and process 0", c)[:2]],
                *[f"    {ln}" for ln in _verdict("process {i} and process 0 differ in {', '.join(differ)}", "",
                                                  c.note)[:2]],
                f"print(\"NOT REPRODUCED: {c.count} fresh processes gave the same bits\")", "sys.exit(0)"]
    if c.kind == "contexts":
        (na, ea), (nb, eb) = c.contexts
        return [f"if (os.cpu_count() or 1) < {c.threads}:  # print, then exit 2",
                f"    sys.exit(print('CANNOT TELL: the settings compared need {c.threads} cores, this machine has', "
                "os.cpu_count()) or 2)",
                f"a = outputs_in_fresh_process({dict(ea)!r})  # {na}",
                f"b = outputs_in_fresh_process({dict(eb)!r})  # {nb}",
                *(_steps(na, nb, c) if c.steps else _compare("a", "b", f"{na} and {nb}", c))]
    if c.kind == "devices":
        return [f"a = run(d, {c.devices[0]!r})", f"b = run(d, {c.devices[1]!r})",
                *_compare("a", "b", f"{c.devices[0]} and {c.devices[1]}", c)]
    if c.kind == "relation":
        members: dict[str, list[Any]] = {}
        for label, b, rows, axis, t in c.pairs:
            members.setdefault(label, []).append(b if (rows is None and b == t) else [b, list(rows or []) or None,
                                                                                        axis, t])
        return ["base = run({k: v for k, v in d.items() if not k.startswith('member.')})",
                f"MEMBERS = {members!r}",
                "differ = []",
                "for member, pairs in MEMBERS.items():  # a pair: base tensor (its rows, their axis), member tensor",
                "    m = run({k.split('.', 2)[2]: v for k, v in d.items() if k.startswith(f'member.{member}.')})",
                "    for b, rows, axis, t in ((p, None, 0, p) if isinstance(p, str) else p for p in pairs):",
                "        if not same(base[b] if rows is None else np.take(base[b], rows, axis=axis), m[t]):",
                "            differ.append(f'{b} ({member}: {t})')",
                "if differ:", *_verdict("{', '.join(differ)}", "every member gives the batch's bits", c.note)]
    if c.kind == "tolerance":
        tol = {k: list(v) for k, v in c.tolerance.items()}
        return ["out, bad = run(d), []",
                f"for k, (atol, rtol, normwise) in {tol!r}.items():  # against the float64 reference",
                "    got, want = out[k].astype(np.float64), d[f'expected.{k}']",
                "    err = np.where(np.isnan(got) & np.isnan(want), 0, np.nan_to_num(np.abs(got - want), nan=np.inf))",
                "    ok = np.linalg.norm(err) <= atol + rtol * np.linalg.norm(want) if normwise else "
                "np.all(err <= atol + rtol * abs(want))",
                "    if not ok:",
                "        i = tuple(int(n) for n in np.unravel_index(np.argmax(err), err.shape))",
                "        bad.append(f'{k}{list(i)} = {float(got[i])!r}, expected {float(want[i])!r}')",
                "if bad:", *_verdict("{'; '.join(bad)}", "within tolerance of the float64 reference", c.note)]
    if c.kind == "bits":
        return ["out = run(d)", "ref = {k[5:]: v for k, v in d.items() if k.startswith('bits.')}",
                f"differ = [k for k in {list(c.tensors) or 'sorted(ref)'} if not same(out[k], ref[k])]",
                "if differ:", *_verdict(f"{{', '.join(differ)}} differ from {c.reference}",
                                        f"the bits of {c.reference}", c.note)]
    raise ValueError(f"check kind {c.kind!r}")


def script_text(*, title: str, what: str, conditions: str, call: RenderedCall, check: Check, inputs: Inputs,
                device: str = "@numpy", env: Mapping[str, str] | None = None) -> str:
    """The whole script. ``env``: the environment the claim holds under (BLAS threads, Chainer's settings),
    set before NumPy and Chainer are imported."""
    devices = check.devices or (device,)
    pin = (f"os.environ.update({dict(env)!r})  # the conditions the claim holds under, before NumPy loads its BLAS"
           if env else "")
    prelude = _PRELUDE.replace("PIN\n", pin + "\n" if pin else "")
    if check.kind in ("processes", "contexts"):
        prelude = prelude.replace("traceback, types", "subprocess, tempfile, traceback, types", 1)
    body = ["#!/usr/bin/env python3", *_docstring(title, what, conditions, check.note, inputs.data),
            prelude.rstrip("\n"), *[f"{i}  # noqa: E402" for i in call.imports], *_versions(call.imports, devices),
            "", *_inputs(inputs), "phase = 'setup'", "", ""]
    gpu = any(d != "@numpy" for d in devices)
    run = list(call.lines)
    if gpu:  # the call on a device: inputs sent there, links moved there (a copied call's env: its xp and links)
        at = next(i for i, ln in enumerate(run) if ln.startswith("def run(d):"))  # after a copied call's code
        run[at] = run[at].replace("def run(d):", "def run(d, device=%r):" % devices[-1], 1)
        run.insert(at + 1, "    d = {k: chainer.get_device(device).send(v) for k, v in d.items()}")
        run = [ln.replace("xp=np,", "xp=chainer.get_device(device).xp,").replace(
            "to_device=lambda link: None", "to_device=lambda link: link.to_device(device)").rstrip() for ln in run]
        run = _to_device(run)
    body += run
    if check.kind not in ("error", "bad_input", "tolerance"):
        body += ["", "", *_SAME]
    if check.kind in ("processes", "contexts"):
        body += ["", "", *_FRESH]
    body += ["", "", *_SAVE, *_check(check), ""]
    return "\n".join(body)


def _to_device(lines: list[str]) -> list[str]:
    """After each link is made (``name = L.X(...)`` / ``EmbedID(...)``), move it to the run's device."""
    out = []
    for ln in lines:
        out.append(ln)
        stripped = ln.strip()
        if stripped.startswith(("link = ", "lstm = ", "embed = ")) and "(" in stripped:
            indent = ln[: len(ln) - len(ln.lstrip())]
            out.append(f"{indent}{stripped.split(' = ')[0]}.to_device(device)")
    return out


def lines_of_code(text: str) -> int:
    """Lines that are neither blank, a comment, nor part of the module docstring."""
    n = 0
    in_doc = False
    seen_doc = False
    for ln in text.splitlines():
        s = ln.strip()
        if not seen_doc and s.startswith('"""'):
            seen_doc = True
            in_doc = not (len(s) > 3 and s.endswith('"""'))
            continue
        if in_doc:
            in_doc = not s.endswith('"""')
            continue
        if s and not s.startswith("#"):
            n += 1
    return n

