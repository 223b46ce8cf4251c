"""``harness export``'s engine: a finding as a script a maintainer reads in one screen, checked before written.

:func:`export_reproducer` learns the claim (:mod:`harness.upstream.claims`), renders the subject's call in the
library's words (:mod:`harness.upstream.script_calls`) and the script (:mod:`harness.upstream.script`), then
runs it here, in child processes, twice over before writing anything:

1. on the case's exact inputs with ``--save-outputs``: its outputs must be the subject's bit for bit (or the same
   error in the same phase) -- the script makes the call the harness judged, not a look-alike;
2. its claim check: it must exit 1 here. Inputs from a seed and a few numbers are tried first; where the claim
   needs the case's own values, they go in a data file beside the script. A claim that does not reproduce
   here is refused (exit 1, as ``shrink`` refuses), never written as a script that says it does.

:func:`outputs_script` writes a script for a case and subject whose ``--save-outputs`` mode is all a caller
needs (bisect's probe). Nothing of a subject runs in this process: the worker runs and the script runs are
children under the lifeline's guard (:func:`harness.core.lifeline.run_guarded`).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

import numpy as np

from harness.core import lifeline
from harness.core.cases import Case, build_arrays
from harness.core.corpus_files import load_case_file
from harness.core.devices import parse_device
from harness.core.errors import InvalidArgument, SetupError
from harness.judge.reproducer import Reproducer
from harness.upstream.claims import Claim, case_arrays, chainer_device, claim_for, context_env, subject_outputs
from harness.upstream.script import Check, Inputs, lines_of_code, script_text
from harness.upstream.script_calls import MODEL_BEGIN, MODEL_END, SHIPPED, RenderedCall, plugin_call, render_call

__all__ = ["Written", "Refused", "export_reproducer", "outputs_script", "run_script", "SCRIPT_TIMEOUT"]

#: Seconds one run of a script may take here (its imports and the call, a fresh process or two).
SCRIPT_TIMEOUT = 600.0
#: The largest data file written beside a script.
MAX_DATA_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Written:
    """What an export wrote and what it says."""

    script: str
    data: str | None
    lines_of_code: int
    title: str
    note: bool
    library: str
    output: str = ""          # the script's own output here (its claim check)
    exit_code: int = 0
    claim: Claim | None = None
    case: Case | None = None
    what: str = ""            # the call, its sizes and what it shows, one sentence


class Refused(Exception):
    """The claim did not reproduce here: nothing is written (exit 1)."""


# ---- the call -----------------------------------------------------------------------------------------------
def _call(r: Reproducer) -> tuple[Any, dict[str, Any]]:
    """The library call of the subject (function, params), from a child where plug-ins are involved."""
    from harness.subjects.call_runs import call_of
    from harness.subjects.registry import get_subject

    if r.plugins:
        return _plugin_call_in_child(r)
    subj = get_subject(r.subject)
    _refuse_role(r.subject, subj.role)
    call = call_of(subj.run)
    if call is None:
        raise InvalidArgument(f"subject={r.subject!r} cannot be exported: its run is not made from one library "
                              f"call (harness.subjects.call_runs.call_run)")
    return call.fn, dict(call.params)


def _refuse_role(subject: str, role: str) -> None:
    if role != "subject":
        raise InvalidArgument(f"subject={subject!r} is a {role} of the harness, not a library's implementation: "
                              f"only a library's findings are exported")


def _plugin_call_in_child(r: Reproducer) -> tuple[Any, dict[str, Any]]:
    """A plug-in is never imported here: a child imports it and names its call (module file, function,
    params); the function's source is then read from that file here, as text."""
    import json

    p = lifeline.run_guarded([sys.executable, "-m", "harness.upstream.plugin_call", json.dumps(list(r.plugins)),
                              r.subject], 120, cwd=os.getcwd())
    if p.code != 0:
        raise SetupError(f"subject={r.subject!r}: its plug-ins could not be loaded to find its call: "
                         f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    found = json.loads(p.stdout.strip().splitlines()[-1])
    _refuse_role(r.subject, found["role"])
    if found["call"] is None:
        raise InvalidArgument(f"subject={r.subject!r} cannot be exported: its run is not made from one library "
                              f"call (harness.subjects.call_runs.call_run)")
    path, name, params = found["call"]
    if os.path.realpath(path) == os.path.realpath(inspect.getsourcefile(_shipped_module()) or ""):
        return getattr(_shipped_module(), name), params
    if not os.path.isfile(path):
        raise SetupError(f"subject={r.subject!r}: its call's module {path} cannot be read")
    return _SourceOnly(path, name), params


def _shipped_module() -> Any:
    from harness.subjects import library_calls as calls

    return calls


@dataclass(frozen=True)
class _SourceOnly:
    """A plug-in's call known by its file and name only (its code never runs here)."""

    path: str
    __name__: str


def _render(fn: Any, params: Mapping[str, Any], case: Case, r: Reproducer, stop: str | None) -> RenderedCall:
    given = "hx" in build_arrays(case)
    if getattr(fn, "__module__", "") == "harness.subjects.library_calls" and fn.__name__ in SHIPPED:
        return render_call(fn.__name__, case.spec, params, case.seed, given, stop)
    from harness.core.contexts import get_context

    path = fn.path if isinstance(fn, _SourceOnly) else inspect.getsourcefile(fn) or ""
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    context = get_context(r.contexts[-1]).to_dict()
    if getattr(fn, "__module__", "") != "harness.subjects.model_calls":
        return plugin_call(source, fn.__name__, params, case.spec, case.seed, context, given)
    # a model subject's training loop: the harness's own module (NumPy and the libraries only), copied whole; its
    # findings are the library's whose modules the recipe trains
    call = plugin_call(source, fn.__name__, params, case.spec, case.seed, context, given, (MODEL_BEGIN, MODEL_END))
    recipe = str(params.get("recipe", case.spec.get("recipe", "")))
    return replace(call, library="chainer" if recipe.startswith("chainer") else "espnet", words=f"{recipe} training")


# ---- running a script -----------------------------------------------------------------------------------------
def run_script(script: str, *args: str, env: Mapping[str, str] | None = None,
               timeout: float = SCRIPT_TIMEOUT) -> tuple[int, str]:
    """Run ``python -I script args`` in a folder of its own, tied to this process: (exit code, output). Where
    this process finds its packages through ``PYTHONPATH`` (a machine whose libraries are installed into a
    folder, as the GPU session does), the script is run without ``-I`` so that it finds them too."""
    flags = [] if os.environ.get("PYTHONPATH") else ["-I"]
    with tempfile.TemporaryDirectory() as tmp:
        p = lifeline.run_guarded([sys.executable, *flags, os.path.abspath(script), *args], timeout, cwd=tmp,
                                 env=dict(env) if env is not None else None)
    if p.code is None:
        return 2, f"{(p.stdout + p.stderr).strip()}\nthe script ran past {timeout:.0f} s and was stopped"
    return p.code, (p.stdout + p.stderr).strip()


def _saved(script: str, env: Mapping[str, str] | None = None) -> dict[str, np.ndarray] | str:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npz")
        code, text = run_script(script, "--save-outputs", out, env=None if env is None else {**os.environ, **env})
        if code != 0 or not os.path.exists(out):
            return f"exit {code}: {(text.splitlines() or ['no output'])[-1]}"
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


def _same_call(script: str, r: Reproducer, case: Case, env: Mapping[str, str] | None = None,
               bits: bool = True, whole: bool = True) -> None:
    """The script's call, on the case's exact inputs, gives the subject's outputs bit for bit (or its error:
    the same type, phase and message). ``env``: the first context's, where the script does not set it."""
    got = _saved(script, env)
    if isinstance(got, str):
        raise SetupError(f"the exported script could not run its call here ({got}); nothing was written")
    ran = subject_outputs(r, case)
    e = ran.record.first_error
    if e:
        want = " ".join(f"{e.get('type')} in {e.get('phase')}: {e.get('message') or ''}".split())[:160]
        said = str(got.get("__error__", ""))
        if not " ".join(said.split()).startswith(want):
            raise SetupError(f"the exported script's call does not fail as the subject's does ({want}; the script: "
                             f"{said or 'no error'}): nothing was written")
        return
    if "__error__" in got:
        raise SetupError(f"the exported script's call raised {got['__error__']} where the subject's did not: "
                         f"nothing was written")
    want_arrays = {k: np.asarray(v) for k, v in ran.arrays.items() if not k.startswith("noise.") and v is not None}
    if not whole:  # a call cut after an error claim's phase: what it computed before
        want_arrays = {k: v for k, v in want_arrays.items() if k in got}
    # the harness records a scalar (a loss) as one element; the script returns it as it is
    got = {k: g.reshape(1) if g.ndim == 0 and k in want_arrays and want_arrays[k].shape == (1,) else g
           for k, g in got.items()}
    differ = [k for k, v in want_arrays.items() if k not in got or got[k].dtype != v.dtype or
              got[k].shape != v.shape or (bits and got[k].tobytes() != v.tobytes())]
    if differ:
        raise SetupError(f"the exported script's call does not give the subject's bits ({', '.join(differ[:5])}): "
                         f"nothing was written")


# ---- the script -------------------------------------------------------------------------------------------------
def _stop_phase(claim: Claim) -> str | None:
    return claim.check.error[1] if claim.check.kind == "error" else None


def _seeded_inputs(case: Case, arrays: Mapping[str, np.ndarray], call: RenderedCall) -> Inputs | None:
    """A seed and a few numbers, where the case is an embedding with few ids: its ids written out, its floats
    drawn, only those the call reads. None where it is not (LSTM weights and sequences come from the case's
    data)."""
    if case.family != "embed" or case.bad:
        return None
    text = "\n".join(call.lines)
    arrays = {k: a for k, a in arrays.items() if f'"{k}"' in text}
    literal = {k: a for k, a in arrays.items() if a.dtype.kind in "iu"}
    if any(a.size > 64 for a in literal.values()):
        return None
    drawn = {k: (tuple(a.shape), a.dtype.name) for k, a in arrays.items() if a.dtype.kind == "f"}
    if len(literal) + len(drawn) != len(arrays):
        return None
    return Inputs(seed=case.seed % 2**32, literal=literal, drawn=drawn)


def _title(call: RenderedCall, claim: Claim, case: Case) -> str:
    c = claim.check
    if c.kind == "error":
        etype, phase = c.error
        edge = next((t.split(":", 1)[1] for t in case.tags if t.startswith(("ids:", "bad:", "grad:"))), "")
        on = {"empty": " on an empty batch", "zero_length": " with a zero-length sequence",
              "ys_some": " when some sequences' outputs get no gradient",
              "hy_ys_some": " when some sequences' outputs get no gradient"}.get(edge, "")
        return f"{call.words} {phase} raises {etype}{on}"
    return f"{call.words}: {claim.what}"


def _what(call: RenderedCall, claim: Claim, case: Case) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in case.spec.items() if k in (
        "vocab", "width", "ids_shape", "ignore_label", "n_layers", "in_size", "hidden", "lengths", "bidirectional",
        "dropout", "grad_outputs", "recipe", "steps", "batch", "max_len", "optimizer"))
    return f"{call.words} ({sizes}): {claim.what}."


def _pinned(r: Reproducer, claim: Claim) -> dict[str, str]:
    """The environment a one-context script sets for itself: its context's (BLAS threads pinned where the claim
    is about bits; nothing for an error in the default context). A two-context script sets each child's."""
    kind = claim.check.kind
    if kind in ("contexts", "devices") or parse_device(r.devices[-1]).kind != "cpu":
        return {}
    if kind in ("error", "bad_input") and r.contexts[-1] == "default":
        return {}
    env, _ = context_env(r.contexts[-1])
    if kind in ("error", "bad_input"):
        env = {k: v for k, v in env.items() if not k.endswith("_NUM_THREADS")} or env
    return env


def _compose(r: Reproducer, case: Case, claim: Claim, call: RenderedCall, inputs: Inputs, note: str) -> str:
    check = claim.check if not note else replace(claim.check, note=note)
    return script_text(title=_title(call, claim, case), what=_what(call, claim, case), conditions=claim.conditions,
                       call=call, check=check, inputs=inputs, device=chainer_device(r.devices[-1]),
                       env=_pinned(r, claim))


def _write_data(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    np.savez_compressed(path, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]


@contextlib.contextmanager
def plugins_loaded(plugins: tuple[str, ...]) -> Iterator[None]:
    """The plug-ins' subjects registered here as proxies (their manifests are taken in children: the oracle and
    the declared order a claim needs) for one export, and the registry as it was afterwards."""
    from harness.subjects import registry

    saved = dict(registry.SUBJECTS)
    try:
        for p in plugins:
            registry.load_plugin(p)
        yield
    finally:
        registry.SUBJECTS.clear()
        registry.SUBJECTS.update(saved)


def export_reproducer(r: Reproducer, out: str, note: str = "") -> Written:
    """Write the script for ``r`` at ``out`` (and its data file beside it where one is needed), after checking
    that its call is the subject's and that its claim reproduces here. ``note``: the contract's reason where
    the behaviour is allowed (the script then says so). Raises :class:`Refused` when the claim does not
    reproduce, ``HarnessError`` for bad input."""
    case = load_case_file(r.case, r.case_id or None)
    with plugins_loaded(r.plugins):
        return _export(r, case, out, note)


def _export(r: Reproducer, case: Case, out: str, note: str) -> Written:
    fn, params = _call(r)
    claim = claim_for(r, case)
    call = _render(fn, params, case, r, _stop_phase(claim))
    arrays = case_arrays(case)
    stem = os.path.splitext(os.path.basename(out))[0]
    data_name = f"{stem}.npz"
    with tempfile.TemporaryDirectory() as tmp:
        exact = os.path.join(tmp, os.path.basename(out))
        _write_data(os.path.join(tmp, data_name), {**arrays, **claim.data})
        with open(exact, "w", encoding="utf-8") as fh:
            fh.write(_compose(r, case, claim, call, Inputs(data=data_name) if arrays or claim.data else Inputs(),
                              note))
        # a plug-in's call is copied verbatim (and may be nondeterministic on purpose): its outputs' names, dtypes
        # and shapes are checked; a shipped call, rendered anew, is checked bit for bit
        _same_call(exact, r, case, context_env(r.contexts[0])[0] if claim.check.kind == "contexts" else None,
                   bits=call.library != "plug-in", whole=_stop_phase(claim) is None)
        chosen, data = exact, bool(arrays or claim.data)
        seeded = _seeded_inputs(case, arrays, call) if not claim.data else None
        if seeded is not None:
            light = os.path.join(tmp, "seeded", os.path.basename(out))
            os.makedirs(os.path.dirname(light))
            with open(light, "w", encoding="utf-8") as fh:
                fh.write(_compose(r, case, claim, call, seeded, note))
            code, text = run_script(light)
            if code == 1:
                chosen, data = light, False
        code, text = run_script(chosen)
        if code != 1:
            last = (text.splitlines() or ["no output"])[-1]
            if code == 2:
                raise SetupError(f"the claim cannot be checked here (the script exits 2: {last}); nothing was written")
            raise Refused(f"the claim does not reproduce here (the script exits {code}: {last}); nothing was written")
        size = os.path.getsize(os.path.join(tmp, data_name))
        if data and size > MAX_DATA_BYTES:
            raise InvalidArgument(f"case {case.id}: its data file would be {size // 1024} KiB (more than "
                                  f"{MAX_DATA_BYTES // 1024} KiB): export the finding's minimal case (shrink it)")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        shutil.copyfile(chosen, out)
        os.chmod(out, 0o755)
        data_path = None
        if data:
            data_path = os.path.join(os.path.dirname(os.path.abspath(out)), data_name)
            shutil.copyfile(os.path.join(tmp, data_name), data_path)
    text_out = open(out, encoding="utf-8").read()
    return Written(out, data_path, lines_of_code(text_out), _title(call, claim, case), bool(note), call.library,
                   text, code, claim, case, _what(call, claim, case))


def outputs_script(case: str, subject: str, out: str, *, case_id: str = "",
                   plugins: tuple[str, ...] = ()) -> Written:
    """A script for the case and subject whose ``--save-outputs`` mode is all a caller needs (bisect's probe):
    the call on the case's exact inputs, checked here to be the subject's. No claim is checked."""
    r = Reproducer(case=case, subject=subject, case_id=case_id, plugins=plugins)
    loaded = load_case_file(case, case_id or None)
    with plugins_loaded(plugins):
        fn, params = _call(r)
    call = _render(fn, params, loaded, r, None)
    claim = Claim(Check("repeats", count=2), {}, "the call's outputs", "CPU (NumPy)")
    stem = os.path.splitext(os.path.basename(out))[0]
    data_name = f"{stem}.npz"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    data_path = os.path.join(os.path.dirname(os.path.abspath(out)), data_name)
    _write_data(data_path, case_arrays(loaded))
    # no conditions pinned in the script: the caller (bisect) gives each probe's environment
    text = script_text(title=_title(call, claim, loaded), what=_what(call, claim, loaded), conditions="as run",
                       call=call, check=claim.check, inputs=Inputs(data=data_name))
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    _same_call(out, r, loaded)
    return Written(out, data_path, lines_of_code(text), _title(call, claim, loaded), False, call.library)
