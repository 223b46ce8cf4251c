"""``harness export``: one finding as ONE self-contained Python script for the library's maintainers.

The script imports only the standard library, NumPy, Chainer and what the subject needs (CuPy on a GPU, ESPnet
for its subjects), never the harness. It holds, in this order: the runner (:mod:`harness.verbs.export_runtime`,
verbatim: Chainer's NumPy-2 shims, one run, the checks), the few pure helpers of the harness that judged the
finding (verbatim), the subject's library call (:mod:`harness.subjects.calls`, verbatim, and a plug-in's call
module after it), and the data: the case, its arrays (base64 of a zlib-compressed .npz), the claim and what
judges it (the oracle's expected values with the tolerance rule that judged them, a reference's bits, a
relation's member cases). Run, it checks the finding's own claim, prints a short account and exits 1 while
the defect is there, 0 when it is gone, 2 where it cannot be checked (a package or the GPU missing).

Which subjects export: those whose run function was made by :func:`harness.subjects.calling.call_run` (every
shipped implementation; a plug-in under the rule :mod:`harness.subjects.calling` states). Anything else -- a
plug-in's wrapper around a shipped run, an oracle, a control -- is refused in one line, never exported with a
call it does not make. The expected values (oracle, reference) come from worker processes, as in ``replay``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import json
import os
import pprint
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from harness.core.cases import Case, build_arrays
from harness.core.contexts import get_context
from harness.core.corpus_files import load_case_file
from harness.core.devices import CPU, parse_device
from harness.core.env import ESPNET_MODULE
from harness.core.errors import InvalidArgument, SetupError
from harness.judge.findings import KINDS, tensor_kind
from harness.judge.reproducer import Reproducer
from harness.subjects import calls
from harness.verbs import export_runtime

__all__ = ["ExportOptions", "export", "claim_check", "script_text"]

#: The pure helpers of the harness a script needs, copied verbatim (each uses only NumPy and its arguments).
_HELPERS = ("harness.core.cases:receives_gradient", "harness.judge.findings:tensor_kind",
            "harness.execute.relations:_rows", "harness.execute.relations:pairs")
#: Finding kinds whose claim is an error raised in a phase (or, for a known defect without one, wrong values).
_ERROR_KINDS = ("error", "known library defect", "expected error")


@dataclass(frozen=True)
class ExportOptions:
    """What ``harness export`` writes: the finding's reproducer, the script's path, an optional bug report."""

    reproducer: Reproducer
    out: str
    markdown: str | None = None


# --------------------------------------------------------------------------- the call
def _call_here(subject: str) -> tuple[str, str, dict[str, Any]]:
    from harness.subjects.calling import call_of
    from harness.subjects.registry import get_subject

    call = call_of(get_subject(subject).run)
    if call is None:
        raise InvalidArgument(_refusal(subject))
    return inspect.getsourcefile(call.fn) or "", call.fn.__name__, dict(call.params)


def _refusal(subject: str) -> str:
    return (f"subject={subject!r} cannot be exported: its run function is not made from a library call "
            f"(harness.subjects.calling.call_run), so no script can make the calls it makes")


_CHILD = """
import json, sys
from harness.subjects.registry import load_plugin, get_subject
from harness.subjects.calling import call_of
for p in json.loads(sys.argv[1]):
    load_plugin(p, in_process=True)
call = call_of(get_subject(sys.argv[2]).run)
import inspect
print(json.dumps(None if call is None else [inspect.getsourcefile(call.fn), call.fn.__name__, dict(call.params)]))
"""


def _call_of_plugin_subject(subject: str, plugins: tuple[str, ...]) -> tuple[str, str, dict[str, Any]]:
    """A plug-in is never imported in the harness's process: a child imports it and names the call."""
    p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(list(plugins)), subject], capture_output=True,
                       text=True, timeout=120, cwd=os.getcwd())
    if p.returncode != 0:
        raise SetupError(f"subject={subject!r}: its plug-ins could not be loaded to find its call: "
                         f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    found = json.loads(p.stdout.strip().splitlines()[-1])
    if found is None:
        raise InvalidArgument(_refusal(subject))
    return found[0], found[1], found[2]


def _module_source(module: str) -> str:
    """The source of the call's module (a file path), checked to import no harness code."""
    if not module or not os.path.isfile(module):
        raise SetupError(f"module={module!r} (the call's module) has no source file to copy into the script")
    with open(module, encoding="utf-8") as fh:
        text = fh.read()
    for node in ast.walk(ast.parse(text)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if any(n == "harness" or n.startswith("harness.") for n in names):
            raise InvalidArgument(f"module={module!r} (the call's module) imports harness code at line "
                                  f"{node.lineno}: a call module must import only NumPy and the library, so that "
                                  f"the script can copy it")
    return text


def _without_future(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("from __future__ import")).strip() + "\n"


def _top_names(text: str) -> set[str]:
    out: set[str] = set()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


# --------------------------------------------------------------------------- the claim
def claim_check(r: Reproducer, case: Case) -> str:
    """Which check of the script a reproducer's finding is (one of ``export_runtime.CHECKS``): from its kind,
    else from what it names (a relation, two contexts, two devices, a baseline, an error, a bad input)."""
    kind = r.kind
    if kind:
        row = next((k for k in KINDS if k.name == kind), None)
        if row is None:
            raise InvalidArgument(f"kind={kind!r} is not a finding kind ({', '.join(k.name for k in KINDS)})")
        if kind == "not reproducible across processes":
            return "processes"
        if kind == "beyond oracle tolerance":
            return "oracle"
        if kind == "accumulation order differs from the declared one":
            return "bits"
        if kind == "bad input misbehaved":
            return "bad_input"
        if kind in _ERROR_KINDS:
            return "error"
        by_replay = {"repeats": "repeats", "contexts": "contexts", "devices": "devices", "relation": "relation",
                     "baseline": "bits"}
        if row.replay in by_replay:
            return by_replay[row.replay]
        raise InvalidArgument(f"kind={kind!r}: a check of the harness itself, not of the library; nothing to export")
    if r.relation:
        return "relation"
    if len(r.contexts) > 1:
        return "contexts"
    if len(r.devices) > 1:
        return "devices"
    if r.baseline:
        return "bits"
    if r.error:
        return "error"
    return "all"


def _context(name: str) -> dict[str, Any]:
    c = get_context(name)
    if c.contention:
        raise InvalidArgument(f"context={name!r}: another process keeping the GPU busy is not something a "
                              f"script can set up; export the finding in another context")
    return c.to_dict()


def _probe(r: Reproducer, case: Case, subject: str, device: str, context: str) -> Any:
    """One run of ``subject`` in a worker (where it can run here; else on the CPU: same call, same dtypes)."""
    from harness.execute.isolated import Runner

    dev = parse_device(device)
    with Runner(plugins=r.plugins) as runner:
        out = runner.run(case, subject, dev if dev.available else CPU, context)
    return out


def _oracle_data(r: Reproducer, case: Case,
                 wrong: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The tolerance of each judged tensor (the harness's rule, as data) and the expected values (and bounds)."""
    from harness.execute.isolated import Runner
    from harness.judge.contracts import load_contracts
    from harness.judge.tolerance import amplification_floor, rounding_bounds, tolerance_for
    from harness.subjects.registry import get_subject

    subj = get_subject(r.subject)
    if subj.oracle is None:
        raise InvalidArgument(f"subject={r.subject!r} has no oracle: a 'beyond oracle tolerance' claim cannot be "
                              f"checked without one")
    dev = parse_device(r.devices[-1])
    with Runner(plugins=r.plugins) as runner:
        mine = runner.run(case, r.subject, dev if dev.available else CPU, r.contexts[-1])
        ref = runner.run(case, subj.oracle, CPU, "default")
    if not ref.arrays:
        raise SetupError(f"the oracle {subj.oracle} gave no values for case {case.id}: {ref.record.first_error}")
    if not mine.arrays:
        raise SetupError(f"{r.subject} gave no values for case {case.id} here to learn its dtypes: "
                         f"{mine.record.first_error}")
    contract = load_contracts(r.contracts or None).find(r.subject, dev.kind, r.contexts[-1])
    tolerance: dict[str, Any] = {}
    data: dict[str, np.ndarray] = {}
    for name, actual in sorted(mine.arrays.items()):
        if name not in ref.arrays or name.startswith("noise."):
            continue
        if wrong and name not in wrong:
            continue
        if not wrong and r.tensor and tensor_kind(name) != r.tensor:
            continue
        actual = np.asarray(actual)
        if actual.dtype.kind not in "biuf":
            continue
        tol = tolerance_for(case, name, actual.dtype, contract)
        t: dict[str, Any] = {"atol": tol.atol, "rtol": tol.rtol, "describe": tol.describe(),
                             "normwise": "normwise" in tol.rules}
        if "amplification" in tol.rules and actual.dtype.kind == "f":
            floor = amplification_floor(ref.arrays.get(f"noise.{name}"))
            if floor:
                t["floor"] = floor
        if "summation_bound" in tol.rules and actual.dtype.kind == "f":
            bound = rounding_bounds(case.family, case.spec, build_arrays(case), actual.dtype.name).get(name)
            if bound is not None:
                data[f"bound.{name}"] = np.asarray(bound, dtype=np.float64)
        tolerance[name] = t
        data[f"expected.{name}"] = np.asarray(ref.arrays[name], dtype=np.float64)
    if not tolerance:
        raise InvalidArgument(f"tensor={r.tensor!r}: no output of {r.subject} of that kind has an oracle value "
                              f"for case {case.id}")
    return tolerance, data


def _bad_rule(r: Reproducer, case: Case) -> dict[str, Any]:
    from harness.judge.contracts import load_contracts
    from harness.judge.verdicts import expectation_for

    dev = parse_device(r.devices[-1])
    rules = load_contracts(r.contracts or None).bad_rules(r.subject, dev.kind, case.tags, r.contexts[-1])
    exp = expectation_for(rules, case.expect, r.subject, dev.kind)
    if exp is None:
        raise InvalidArgument(f"case {case.id}: no rule says what this bad input must do for {r.subject}")
    if exp.errors is None:
        raise InvalidArgument(f"case {case.id}: its rule allows any outcome the same everywhere; export the "
                              f"finding with its two contexts (--contexts A,B) instead")
    return {"errors": sorted(exp.errors), "phases": {k: sorted(v) for k, v in exp.phases.items()},
            "no_error_ok": exp.no_error_ok, "describe": exp.describe(), "source": exp.source}


def _known_wrong(r: Reproducer, case: Case) -> tuple[str, ...]:
    from harness.judge.contracts import load_contracts

    dev = parse_device(r.devices[-1])
    known = load_contracts(r.contracts or None).known_defects_for(r.subject, dev.kind, case.tags, r.contexts[-1])
    return tuple(sorted({t for d in known for t in d.wrong}))


def _error_of(r: Reproducer, case: Case) -> dict[str, str]:
    if r.error:
        etype, _, phase = r.error.partition(" in ")
        return {"type": etype.strip(), "phase": phase.split(":", 1)[0].strip()}
    out = _probe(r, case, r.subject, r.devices[-1], r.contexts[-1])
    e = out.record.first_error
    if not e:
        raise InvalidArgument(f"{r.subject} raised no error on case {case.id} here: give the error (--error "
                              f"'Type in phase') the finding recorded")
    return {"type": str(e.get("type")), "phase": str(e.get("phase"))}


# --------------------------------------------------------------------------- the script
def _build(r: Reproducer, case: Case) -> tuple[dict[str, Any], dict[str, Case], dict[str, np.ndarray], str]:
    """The claim, the arrays of every case the script runs, the reference data, and a one-line title."""
    check = claim_check(r, case)
    claim: dict[str, Any] = {"check": check, "device": r.devices[-1], "context": _context(r.contexts[-1]),
                             "tensor_kind": r.tensor, "kind": r.kind}
    if r.flaky and check not in ("repeats", "processes"):
        claim["tries"] = 20  # as replay runs a flaky subject's other findings 20 times
    cases = {"case": case}
    data: dict[str, np.ndarray] = {}
    what = r.kind or check
    if check == "repeats":
        claim["repeats"] = r.repeats or 20
    elif check == "processes":
        claim["fresh"] = max(2, r.fresh or 3)
    elif check == "contexts":
        if len(r.contexts) != 2:
            raise InvalidArgument(f"contexts={','.join(r.contexts)!r}: a cross-context claim needs two (A,B)")
        claim["contexts"] = [[c, _context(c)] for c in r.contexts]
        what = f"context {r.contexts[1]} vs {r.contexts[0]}"
    elif check == "devices":
        if len(r.devices) != 2:
            raise InvalidArgument(f"devices={','.join(r.devices)!r}: a cross-device claim needs two (A,B)")
        claim["devices"] = list(r.devices)
        what = f"device {r.devices[1]} vs {r.devices[0]}"
    elif check == "error":
        wrong = _known_wrong(r, case) if r.kind == "known library defect" and not r.error else ()
        if wrong:
            check = claim["check"] = "oracle"
            claim["tolerance"], data = _oracle_data(r, case, wrong)
            what = f"known library defect: wrong {', '.join(wrong)}"
        else:
            claim["error"] = _error_of(r, case)
            what = f"{claim['error']['type']} in {claim['error']['phase']}"
    elif check == "bad_input":
        claim["rule"] = _bad_rule(r, case)
    elif check == "oracle":
        claim["tolerance"], data = _oracle_data(r, case)
    elif check == "relation":
        from harness.execute.relations import get_relation, members

        rel = get_relation(r.relation)
        related = members(case, [rel])
        if not related:
            raise InvalidArgument(f"relation={r.relation!r} gives case {case.id} no member (family, batch of one, "
                                  f"size or dropout): nothing to compare")
        claim.update(relation=rel.name, relation_text=rel.description,
                     members=[{"case": f"member{i}", "label": m.label, "index": list(m.index)}
                              for i, m in enumerate(related)])
        cases.update({f"member{i}": m.case for i, m in enumerate(related)})
        what = f"not invariant under '{rel.name}'"
    elif check == "bits":
        data, claim["reference"] = _reference_bits(r, case)
    elif check == "all":
        data, what = _single(r, case, claim)
    title = (f"{r.subject} [{r.devices[-1]}] {r.contexts[-1]}: {what}" + (f" ({r.tensor})" if r.tensor else "")
             + f" -- case {case.id}")
    return claim, cases, data, title


def _single(r: Reproducer, case: Case, claim: dict[str, Any]) -> tuple[dict[str, np.ndarray], str]:
    """A reproducer that names no kind (the printed ``export`` command of a finding on one device and context):
    the claim is what ``replay`` checks there. A bad input: its rule; an error: that error in its phase;
    values: run to run, against the oracle where one applies, against the declared order where one is."""
    from harness.subjects.registry import get_subject, order_reference

    out = _probe(r, case, r.subject, r.devices[-1], r.contexts[-1])
    e = out.record.first_error
    checks: list[str] = []
    data: dict[str, np.ndarray] = {}
    if case.bad:
        claim["rule"] = _bad_rule(r, case)
        checks.append("bad_input")
    elif e:
        claim["error"] = {"type": str(e.get("type")), "phase": str(e.get("phase"))}
        checks.append("error")
    else:
        claim["repeats"] = r.repeats or 20
        checks.append("repeats")
        subj = get_subject(r.subject)
        if subj.oracle is not None and get_subject(subj.oracle).applies_to(case):
            claim["tolerance"], data = _oracle_data(r, case)
            checks.append("oracle")
        declared = order_reference(r.subject, parse_device(r.devices[-1]).kind)
        if declared is not None and get_subject(declared[0]).applies_to(case):
            bits, claim["reference"] = _reference_bits(r, case)
            data.update(bits)
            checks.append("bits")
    claim["checks"] = checks
    return data, " and ".join(checks).replace("_", " ") + " (what replay checks)"


def _reference_bits(r: Reproducer, case: Case) -> tuple[dict[str, np.ndarray], str]:
    """Bits to compare with: the baseline's arrays of the task, or the declared order's reference."""
    from harness.execute.isolated import Runner
    from harness.subjects.registry import get_subject, order_reference

    dev = parse_device(r.devices[-1])
    if r.baseline:
        from harness.execute.campaign import load_tasks
        from harness.outputs.gate import _baseline_arrays

        base = next((t for t in load_tasks(r.baseline).values() if (t.case_id, t.subject, t.device, t.context)
                     == (case.id, r.subject, dev.id, r.contexts[-1])), None)
        arrays = _baseline_arrays(r.baseline, base) if base is not None else None
        if not arrays:
            raise InvalidArgument(f"baseline={r.baseline!r} keeps no arrays of case {case.id} for {r.subject}: "
                                  f"nothing to compare with")
        return {f"bits.{k}": np.asarray(v) for k, v in arrays.items()}, f"the baseline run {r.baseline}"
    declared = order_reference(r.subject, dev.kind)
    if declared is None:
        raise InvalidArgument(f"subject={r.subject!r} declares no accumulation order: nothing to compare with")
    get_subject(declared[0])
    with Runner(plugins=r.plugins) as runner:
        ref = runner.run(case, declared[0], CPU, "default")
    if not ref.arrays:
        raise SetupError(f"the order reference {declared[0]} gave no values: {ref.record.first_error}")
    return ({f"bits.{k}": np.asarray(v) for k, v in ref.arrays.items()},
            f"the declared accumulation order ({declared[1]})")


def _needs(module: str, params: dict[str, Any], devices: tuple[str, ...]) -> str:
    needs = ["NumPy", "chainer==7.8.1"]
    if params.get("target") == "espnet":
        needs.append(f"ESPnet ({ESPNET_MODULE}; pip install espnet --no-deps)")
    if any(d != "cpu" for d in devices):
        needs.append("CuPy and an NVIDIA GPU")
    return ", ".join(needs)


def script_text(r: Reproducer, case: Case, module: str, fn: str, params: dict[str, Any]) -> str:
    """The whole script for ``r`` on ``case`` with the call ``module.fn(**params)``."""
    claim, cases, data, title = _build(r, case)
    arrays = {k: build_arrays(c) for k, c in cases.items()}
    parts = [("the runner: standard library and NumPy only (harness/verbs/export_runtime.py)",
              _without_future(inspect.getsource(export_runtime)))]
    helpers = []
    for spec in _HELPERS:
        mod, _, name = spec.partition(":")
        helpers.append(inspect.getsource(getattr(importlib.import_module(mod), name)))
    parts.append(("pure helpers of the harness that judged the finding, verbatim (" + ", ".join(_HELPERS) + ")",
                  "\n\n".join(helpers)))
    shipped = inspect.getsourcefile(calls) or ""
    parts.append(("the library call, as the harness's subject makes it (harness/subjects/calls.py)",
                  _without_future(_module_source(shipped))))
    if os.path.realpath(module) != os.path.realpath(shipped):
        parts.append((f"the plug-in's call module ({os.path.relpath(module)})",
                      _without_future(_module_source(module))))
    seen: dict[str, str] = {}
    for label, text in parts:
        for name in _top_names(text):
            if name in seen and name not in ("Emit",):
                raise InvalidArgument(f"module={module!r}: {name!r} is defined both in {seen[name]} and in "
                                      f"{label}; rename it so the script can hold both")
            seen[name] = label
    head = (f'#!/usr/bin/env python3\n"""{title}\n\nWritten by `harness export` (chainer-repro-harness) from case '
            f"{case.id}; it does not need the harness.\nNeeds: {_needs(module, params, r.devices)}.\n"
            f"The call: {fn}({', '.join(f'{k}={v!r}' for k, v in params.items())}), defined below; what it is checked "
            f"for: CLAIM, at the end with the data.\nInputs (ARRAYS, bit for bit): {_inputs_text(arrays['case'])}.\n"
            f"Run it with python: exit 1 while the defect is present, 0 once it is gone, 2 where it cannot be "
            f'checked (a package or the GPU missing).\n"""\n\nfrom __future__ import annotations\n')
    body = [head]
    for label, text in parts:
        body.append(f"\n# {'=' * 100}\n# {label}\n# {'=' * 100}\n\n{text}")
    data_lines = [
        f"TITLE = {title!r}",
        f"ESPNET_MODULE = {ESPNET_MODULE!r}",
        f"CALL = {fn!r}",
        f"PARAMS = {pprint.pformat(params, width=110)}",
        f"CLAIM = {pprint.pformat(claim, width=110, sort_dicts=True)}",
        f"CASES = {pprint.pformat(_case_specs(cases), width=110)}",
        "ARRAYS = {",
        *[f"    {k!r}: unpack(\"\"\"\n{export_runtime.pack(v)}\n\"\"\")," for k, v in arrays.items()],
        "}",
        f'EXPECTED = """\n{export_runtime.pack(data) if data else ""}\n"""',
        "",
        'if __name__ == "__main__":',
        "    sys.exit(main(sys.argv))",
    ]
    body.append(f"\n# {'=' * 100}\n# the data: the case, its arrays, the claim and what judges it\n# {'=' * 100}\n\n"
                + "\n".join(data_lines) + "\n")
    return "\n".join(body)


def _inputs_text(arrays: dict[str, np.ndarray]) -> str:
    """Each input's dtype and shape, and the values of small integer arrays (the ids)."""
    out = []
    for k, a in arrays.items():
        text = f"{k} {a.dtype}{tuple(a.shape)}"
        if a.dtype.kind in "iu" and a.size <= 48:
            text += f" = {a.tolist()}"
        out.append(text)
    return "; ".join(out)


def _case_specs(cases: dict[str, Case]) -> dict[str, Any]:
    """Each case the script runs as the call sees it: id, family, seed, spec (its arrays travel separately)."""
    return {k: {"id": c.id, "family": c.family, "seed": c.seed, "spec": c.to_dict()["spec"]} for k, c in cases.items()}


def export(opts: ExportOptions) -> int:
    """Write the script (and the bug report where asked); 0 when written. Bad input raises ``HarnessError``."""
    r = opts.reproducer
    if not opts.out:
        raise InvalidArgument("out='' must name the script file to write")
    case = load_case_file(r.case, r.case_id or None)
    with _plugins_loaded(r.plugins):
        if r.plugins:
            module, fn, params = _call_of_plugin_subject(r.subject, r.plugins)
        else:
            module, fn, params = _call_here(r.subject)
        text = script_text(r, case, module, fn, params)
    os.makedirs(os.path.dirname(os.path.abspath(opts.out)), exist_ok=True)
    with open(opts.out, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(opts.out, 0o755)
    print(f"wrote {opts.out} ({len(text.encode()) // 1024} KiB): python {opts.out} exits 1 while the defect is "
          f"there, 0 when it is gone")
    if opts.markdown:
        _markdown(opts.out, opts.markdown, text)
        print(f"wrote {opts.markdown}")
    return 0


@contextlib.contextmanager
def _plugins_loaded(plugins: tuple[str, ...]) -> Iterator[None]:
    """The plug-ins' subjects registered here as proxies (their manifests are taken in children: the oracle and
    the declared order a claim needs) for the duration of one export, and the registry as it was afterwards,
    so that a Python caller's next export sees the shipped subjects again."""
    from harness.subjects import registry

    saved = dict(registry.SUBJECTS)
    try:
        for p in plugins:
            registry.load_plugin(p)
        yield
    finally:
        registry.SUBJECTS.clear()
        registry.SUBJECTS.update(saved)


def _markdown(script: str, path: str, text: str) -> None:
    """An upstream bug report: title, environment, the script, its output (the script run here, isolated)."""
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([sys.executable, "-I", os.path.abspath(script)], capture_output=True, text=True,
                           cwd=tmp, timeout=600)
    out = p.stdout.strip()
    title = text.split('"""', 2)[1].splitlines()[0]
    versions = next((ln[len("versions: "):] for ln in out.splitlines() if ln.startswith("versions: ")), "(see output)")
    report = (f"# {title}\n\n## Environment\n\n{versions}\n\n## Reproducer\n\nSave as `repro.py` and run "
              f"`python repro.py` (exit 1 while the defect is present, 0 once fixed; the inputs are embedded).\n\n"
              f"```python\n{text}```\n\n## Output (exit {p.returncode})\n\n```\n{out}\n"
              + (f"{p.stderr.strip()[-2000:]}\n" if p.returncode not in (0, 1) else "") + "```\n")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(report)
