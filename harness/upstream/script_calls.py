"""The library call of an exported reproducer, written as a maintainer would write it by hand.

Each shipped call of :mod:`harness.subjects.library_calls` has a renderer here that writes the same call, specialised
to one case (its sizes, ignore label, dropout, which outputs receive a gradient), as the body of
``def run(d):`` -- ``d`` the inputs by the harness's array names -- returning every output and gradient by the
same names the subject records, and setting the global ``phase`` as it goes (forward, backward,
double-backward), so that a script can say where an error happened. The exporter runs the rendered call on the
case's exact inputs and compares its outputs with the subject's, bit for bit, before it writes a script: the
two writings of a call cannot drift apart unnoticed.

A plug-in's call (not one of these) is copied verbatim with the module-level names it uses, behind a small
adapter giving it the ``env`` and ``emit`` it expects (:func:`plugin_call`).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from harness.core.cases import receives_gradient

__all__ = ["RenderedCall", "render_call", "plugin_call", "SHIPPED", "PLUGIN_BEGIN", "PLUGIN_END", "MODEL_BEGIN",
           "MODEL_END"]

ESPNET_EMBED = "espnet.nets.chainer_backend.deterministic_embed_id"


@dataclass(frozen=True)
class RenderedCall:
    """``imports``: the library names the call needs (one line each); ``lines``: ``def run(d):`` and its body;
    ``library``: ``chainer`` or ``espnet`` (whose defect a finding of this call is); ``words``: the call in
    the library's own words, for titles (``EmbedID``, ``F.embed_id``, ``NStepLSTM``, ...)."""

    imports: tuple[str, ...]
    lines: tuple[str, ...]
    library: str
    words: str


#: The lines around a plug-in's own call, copied whole into a script (it stands in for a library's code).
PLUGIN_BEGIN = "# ---- the plug-in's own call, copied whole ----"
PLUGIN_END = "# ---- end of the plug-in's own call ----"
#: The same around a model subject's training loop (the harness's harness/subjects/model_calls.py, copied whole).
MODEL_BEGIN = "# ---- the training loop, copied whole from the harness (harness/subjects/model_calls.py) ----"
MODEL_END = "# ---- end of the training loop ----"
#: The last line of every call: its outputs on the host, the gradients never computed left out.
RETURN = "    return {k: chainer.backend.CpuDevice().send(v) for k, v in out.items() if v is not None}"


def _upto(phases: Sequence[tuple[str, list[str]]], stop: str | None) -> list[str]:
    """The phases' lines, each after ``phase = NAME``, up to and including ``stop`` (every phase when None)."""
    out: list[str] = []
    for name, lines in phases:
        out.append(f"    phase = {name!r}")
        out += [f"    {ln}" for ln in lines]
        if name == stop:
            break
    return out


def _label(il: Any) -> str:
    return "" if il is None else f", ignore_label={il!r}"


def _embed(spec: Mapping[str, Any], params: Mapping[str, Any], stop: str | None, link: bool) -> RenderedCall:
    espnet = params.get("target") == "espnet"
    il = spec.get("ignore_label")
    if link:
        cls = "EmbedID" if espnet else "L.EmbedID"
        v, w = (int(n) for n in (spec.get("w_shape") or (spec["vocab"], spec["width"]))[:2])
        head = [f"link = {cls}({v}, {w}{_label(il)})",
                'link.W.array = d["W"]  # the case\'s weights, bit for bit']
        phases = [("forward", ['y = link(d["x"])']),
                  ("backward", ["link.cleargrads()", 'y.grad = d["gy"]', "y.backward()"])]
        ret = '{"y": y.array, "grad.W": link.W.grad}'
        words = "EmbedID"
    else:
        fn = "embed_id" if espnet else "F.embed_id"
        head = ['W, gy = chainer.Variable(d["W"]), chainer.Variable(d["gy"])']
        phases = [("forward", [f'y = {fn}(d["x"], W{_label(il)})']),
                  ("backward", ["y.grad_var = gy", "y.backward(enable_double_backprop=True)", "gW = W.grad_var"]),
                  ("double-backward", ["W.cleargrad()", "gy.cleargrad()", 'F.sum(gW * d["ggW"]).backward()'])]
        ret = '{"y": y.array, "grad.W": gW.array, "grad2.gy": gy.grad, "grad2.W": W.grad}'
        words = "embed_id"
    body = ["def run(d):", "    global phase", *[f"    {ln}" for ln in head], *_upto(phases, stop)]
    body += [f"    out = {ret}" if stop is None or stop == phases[-1][0] else "    out = {}", RETURN]
    imports = (f"from {ESPNET_EMBED} import {'EmbedID' if link else 'embed_id'}",) if espnet else ()
    return RenderedCall(imports, tuple(body), "espnet" if espnet else "chainer", words)


def _lstm_outputs(spec: Mapping[str, Any], n: int) -> tuple[str, str]:
    """The outputs that receive an upstream gradient and their gradients, as two list expressions."""
    chosen = [o for o in ("hy", "cy") if receives_gradient(spec, o, n)]
    ys = [i for i in range(n) if receives_gradient(spec, f"ys.{i}", n)]
    outs = chosen + (["*ys"] if len(ys) == n else [f"ys[{i}]" for i in ys])
    grads = [f'd["g{o}"]' for o in chosen] + (
        ['*(d[f"gys.{i}"] for i in range(len(ys)))'] if len(ys) == n else [f'd["gys.{i}"]' for i in ys])
    if not chosen and len(ys) == n:
        return "ys", '[d[f"gys.{i}"] for i in range(len(ys))]'
    return f"[{', '.join(outs)}]", f"[{', '.join(grads)}]"


def _backward(outs: str, grads: str) -> list[str]:
    return [f"grads = {grads}", f"chainer.backward({outs}, [chainer.Variable(g) for g in grads])"]


def _dropout(spec: Mapping[str, Any], seed: int) -> list[str]:
    if float(spec.get("dropout", 0.0)) <= 0:
        return []
    return [f"np.random.seed({int(spec.get('dropout_seed', seed)) % 2**32})  # dropout's masks come from NumPy's "
            f"global generator"]


def _lstm_sizes(spec: Mapping[str, Any]) -> tuple[int, int, int, float, bool]:
    return (int(spec["n_layers"]), int(spec.get("in_size", spec.get("width", 0))), int(spec["hidden"]),
            float(spec.get("dropout", 0.0)), bool(spec.get("bidirectional", False)))


_LOAD = ["for name, p in {link}.namedparams():  # /k/wj and /k/bj take the case's ws.k.j and bs.k.j, bit for bit",
         '    _, k, wj = name.split("/")',
         '    p.array = d[f"{wj[0]}s.{k}.{wj[1:]}"]']
_PARAM_GRADS = ['out.update({f"grad.{p}s.{k}.{j}": getattr(c, p + str(j)).grad for k, c in enumerate({link}) '
                'for j in range(8) for p in "wb"})']
#: The sequences of an LSTM case: as many as the inputs hold (a relation's member holds fewer).
_XS = 'xs = [chainer.Variable(d[f"xs.{i}"]) for i in range(sum(k.startswith("xs.") for k in d))]'


def _lstm_link(spec: Mapping[str, Any], params: Mapping[str, Any], stop: str | None, seed: int,
               given: bool) -> RenderedCall:
    n_layers, in_size, hidden, dropout, bi = _lstm_sizes(spec)
    n = len(spec["lengths"])
    cls = "L.NStepBiLSTM" if bi else "L.NStepLSTM"
    outs, grads = _lstm_outputs(spec, n)
    state = ('chainer.Variable(d["hx"]), chainer.Variable(d["cx"])' if given else "None, None")
    head = [f"lstm = {cls}({n_layers}, {in_size}, {hidden}, {dropout!r})",
            *[s.replace("{link}", "lstm") for s in _LOAD],
            _XS]
    if given:
        head.append("hx, cx = " + state)
    head += _dropout(spec, seed)
    phases = [("forward", [f"hy, cy, ys = lstm({'hx, cx' if given else 'None, None'}, xs)"]),
              ("backward", ["lstm.cleargrads()", *_backward(outs, grads)])]
    body = ["def run(d):", "    global phase", *[f"    {ln}" for ln in head], *_upto(phases, stop)]
    body += _lstm_return("lstm", given, stop)
    return RenderedCall((), tuple(body), "chainer", "NStepBiLSTM" if bi else "NStepLSTM")


def _lstm_return(link: str, given: bool, stop: str | None) -> list[str]:
    if stop == "forward":
        return ["    out = {}", RETURN]
    grads = ['**{f"grad.xs.{i}": x.grad for i, x in enumerate(xs)}' if link != "embed" else '"grad.W": embed.W.grad']
    if given:
        grads.append('"grad.hx": hx.grad, "grad.cx": cx.grad')
    elif grads[0].startswith("**"):  # the comprehension alone: written as one
        grads = [grads[0][3:-1]]
    out = ['    out = {"hy": hy.array, "cy": cy.array, **{f"ys.{i}": y.array for i, y in enumerate(ys)}}',
           f"    out.update({{{', '.join(grads)}}})"]
    out += ["    " + s.replace("{link}", "lstm") for s in _PARAM_GRADS]
    return out + [RETURN]


def _lstm_function(spec: Mapping[str, Any], params: Mapping[str, Any], stop: str | None, seed: int,
                   given: bool) -> RenderedCall:
    n_layers, _, hidden, dropout, bi = _lstm_sizes(spec)
    n = len(spec["lengths"])
    cells = n_layers * (2 if bi else 1)
    fn = "F.n_step_bilstm" if bi else "F.n_step_lstm"
    outs, grads = _lstm_outputs(spec, n)
    state = ('d["hx"], d["cx"]' if given else
             f'*(np.zeros(({cells}, len(xs), {hidden}), d["ws.0.0"].dtype) for _ in "hc")')
    head = [f'ws, bs = ([[chainer.Variable(d[f"{{p}}s.{{k}}.{{j}}"]) for j in range(8)] for k in range({cells})] '
            f'for p in "wb")',
            _XS, f"hx, cx = (chainer.Variable(a) for a in ({state},))",
            "# as L.NStepLSTM calls it: longest first, time-major, then back to the batch's order",
            'perm = np.argsort([-len(x) for x in xs], kind="stable").astype(np.int32)',
            "inv = np.argsort(perm)", *_dropout(spec, seed)]
    fwd = ["xs_tm = F.transpose_sequence([xs[p] for p in perm])",
           f"hy, cy, ys_tm = {fn}({n_layers}, {dropout!r}, F.permutate(hx, perm, axis=1), "
           "F.permutate(cx, perm, axis=1), ws, bs, xs_tm)",
           "ys = [*map(F.transpose_sequence(ys_tm).__getitem__, inv)]  # back to the batch's order",
           "hy, cy = F.permutate(hy, perm, axis=1, inv=True), F.permutate(cy, perm, axis=1, inv=True)"]
    phases = [("forward", fwd), ("backward", [*_backward(outs, grads)])]
    body = ["def run(d):", "    global phase", *[f"    {ln}" for ln in head], *_upto(phases, stop)]
    if stop == "forward":
        body += ["    out = {}", RETURN]
    else:
        body += ['    out = {"hy": hy.array, "cy": cy.array, **{f"ys.{i}": y.array for i, y in enumerate(ys)}}',
                 '    out.update({f"grad.xs.{i}": x.grad for i, x in enumerate(xs)})']
        if given:
            body.append('    out.update({"grad.hx": hx.grad, "grad.cx": cx.grad})')
        body += ['    out.update({f"grad.{n}s.{k}.{j}": p.grad for n, ps in (("w", ws), ("b", bs)) '
                 'for k, cell in enumerate(ps) for j, p in enumerate(cell)})', RETURN]
    return RenderedCall((), tuple(body), "chainer", "n_step_bilstm" if bi else "n_step_lstm")


def _embed_lstm(spec: Mapping[str, Any], params: Mapping[str, Any], stop: str | None, seed: int,
                given: bool) -> RenderedCall:
    espnet = params.get("target") == "espnet"
    n_layers, _, hidden, dropout, bi = _lstm_sizes(spec)
    vocab, width = int(spec["vocab"]), int(spec["width"])
    il = spec.get("ignore_label")
    lengths = [int(n) for n in spec["lengths"]]
    outs, grads = _lstm_outputs(spec, len(lengths))
    label = -1 if il is None else il
    head = [f"embed = {'EmbedID' if espnet else 'L.EmbedID'}({vocab}, {width}, initialW=d[\"W\"], "
            f"ignore_label={label})" if spec.get("dtype", "float32") == "float32" else
            f"embed = {'EmbedID' if espnet else 'L.EmbedID'}({vocab}, {width}, ignore_label={label})",
            *([] if spec.get("dtype", "float32") == "float32" else ['embed.W.array = d["W"]']),
            f"lstm = {'L.NStepBiLSTM' if bi else 'L.NStepLSTM'}({n_layers}, {width}, {hidden}, {dropout!r})",
            *[s.replace("{link}", "lstm") for s in _LOAD]]
    if given:
        head.append('hx, cx = chainer.Variable(d["hx"]), chainer.Variable(d["cx"])')
    head += _dropout(spec, seed)
    fwd = ['e = embed(d["x"])', 'xs = [e[i, :n] for i, n in enumerate(d["lengths"])]  # each row cut to its length',
           f"hy, cy, ys = lstm({'hx, cx' if given else 'None, None'}, xs)"]
    phases = [("forward", fwd), ("backward", ["for link in (embed, lstm): link.cleargrads()  # noqa: E701",
                                               *_backward(outs, grads)])]
    body = ["def run(d):", "    global phase", *[f"    {ln}" for ln in head], *_upto(phases, stop)]
    body += _lstm_return("embed", given, stop)
    imports = (f"from {ESPNET_EMBED} import EmbedID",) if espnet else ()
    return RenderedCall(imports, tuple(body), "espnet" if espnet else "chainer",
                        f"EmbedID -> {'NStepBiLSTM' if bi else 'NStepLSTM'}")


#: The shipped calls by name: renderer(spec, params, stop phase, case seed, initial state given).
SHIPPED: dict[str, Callable[..., RenderedCall]] = {
    "embed_function": lambda s, p, stop, seed, given: _embed(s, p, stop, link=False),
    "embed_link": lambda s, p, stop, seed, given: _embed(s, p, stop, link=True),
    "lstm_link": _lstm_link,
    "lstm_function": _lstm_function,
    "embed_lstm": _embed_lstm,
}


def render_call(fn_name: str, spec: Mapping[str, Any], params: Mapping[str, Any], seed: int, given: bool,
                stop: str | None = None) -> RenderedCall:
    """The shipped call ``fn_name`` (a :mod:`harness.subjects.library_calls` function) for one case; ``stop``: the
    phase after which the call may end (an error claim's phase), None for the whole call."""
    spec = dict(spec)
    if fn_name in ("lstm_link", "lstm_function", "embed_lstm"):
        spec["bidirectional"] = bool(params.get("bidirectional", spec.get("bidirectional", False)))
    return SHIPPED[fn_name](spec, params, stop, seed, given)


# ---- a plug-in's own call ------------------------------------------------------------------------------------
def _used_names(source: str, name: str) -> tuple[list[str], list[str], list[str]]:
    """The module-level definitions the function ``name`` of a module's ``source`` needs (functions, classes and
    assignments such as a constant or a type alias, each after those it needs; itself last), the module's import
    lines that bind a name they use (NumPy's and ``__future__``'s left out: every script has them), and the
    shipped calls it wraps through ``env.calls.X``."""
    tree = ast.parse(source)
    defs: dict[str, ast.stmt] = {}
    imports: dict[str, ast.stmt] = {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            defs[n.name] = n
        elif isinstance(n, ast.Assign) and len(n.targets) == 1:
            target = n.targets[0]
            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(t, ast.Name):
                    defs[t.id] = n
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            defs[n.target.id] = n
        elif isinstance(n, (ast.Import, ast.ImportFrom)) and not (
                isinstance(n, ast.ImportFrom) and n.module == "__future__"):
            for alias in n.names:
                imports[alias.asname or alias.name.split(".")[0]] = n
    if name not in defs or not isinstance(defs[name], ast.FunctionDef):
        raise ValueError(f"no function {name!r} at the top level of its module")
    wanted: list[str] = []
    used_imports: list[ast.stmt] = []
    shipped: list[str] = []

    seen: set[str] = set()

    def visit(n: str) -> None:
        if n in seen:
            return
        seen.add(n)
        for sub in ast.walk(defs[n]):
            if isinstance(sub, ast.Name) and sub.id in defs and sub.id != n:
                visit(sub.id)
            elif isinstance(sub, ast.Name) and sub.id in imports and imports[sub.id] not in used_imports:
                used_imports.append(imports[sub.id])
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) \
                    and sub.value.attr == "calls" and sub.attr in SHIPPED and sub.attr not in shipped:
                shipped.append(sub.attr)
        wanted.append(n)

    visit(name)
    lines = [ast.get_source_segment(source, i) or "" for i in used_imports]
    lines = [ln for ln in lines if ln not in SCRIPT_IMPORTS]
    nodes = dict.fromkeys(defs[n] for n in wanted)  # one statement may bind several names: copied once
    return [textwrap.dedent(ast.get_source_segment(source, node) or "") for node in nodes], lines, shipped


#: Import lines every script has already (its prelude's): a copied module's own are left out.
SCRIPT_IMPORTS = frozenset(["import numpy as np", "import numpy", "import os", "import sys", "import importlib",
                            "import types", "import traceback", "import platform", "import argparse"])
#: The harness's own calls modules a plug-in may import from (NumPy and the libraries only): what it uses of them
#: is copied into the script with the plug-in's call, never imported.
COPIED_MODULES = ("harness.subjects.model_calls",)


def _copied(source: str, name: str) -> tuple[list[str], list[str], list[str]]:
    """:func:`_used_names`, with what the function imports from :data:`COPIED_MODULES` copied in before it."""
    import importlib.util

    sources, imports, shipped = _used_names(source, name)
    before: list[str] = []
    kept: list[str] = []
    for line in imports:
        node = ast.parse(line).body[0]
        if not (isinstance(node, ast.ImportFrom) and node.module in COPIED_MODULES):
            kept.append(line)
            continue
        spec = importlib.util.find_spec(node.module)
        with open(spec.origin if spec and spec.origin else "", encoding="utf-8") as fh:
            module_source = fh.read()
        for alias in node.names:
            more, more_imports, more_shipped = _used_names(module_source, alias.name)
            before += [s for s in more if s not in before]
            kept += [i for i in more_imports if i not in kept]
            shipped += [c for c in more_shipped if c not in shipped]
    return before + [s for s in sources if s not in before], kept, shipped


def plugin_call(source: str, name: str, params: Mapping[str, Any], spec: Mapping[str, Any], seed: int,
                context: Mapping[str, Any], given: bool,
                markers: tuple[str, str] = (PLUGIN_BEGIN, PLUGIN_END)) -> RenderedCall:
    """A plug-in's call, verbatim (its docstrings left out), behind the one-line ``env`` it expects; a shipped
    call it wraps (``env.calls.lstm_link``) is rendered as above and offered under the same name; what it imports
    from the harness's calls modules (:data:`COPIED_MODULES`) is copied in too. ``markers``: the lines around the
    copied code (:data:`MODEL_BEGIN` and :data:`MODEL_END` for a model subject's training loop)."""
    sources, module_imports, shipped = _copied(source, name)
    # a model's call moves its links to the device and may build ESPnet's embedding: the env offers both then
    model = any("env.to_device" in src or "env.espnet" in src for src in sources)
    lines: list[str] = [markers[0]]
    for i, src in enumerate(sources):
        lines += [*(["", ""] if i else []), *_without_docstrings(src).splitlines()]
    lines += [markers[1], "", ""]
    wrapped = []
    for inner_name in shipped:
        inner = render_call(inner_name, spec, {}, seed, given)
        lines += [ln.replace("def run(d):", f"def _{inner_name}(d):", 1) for ln in inner.lines] + [""]
        wrapped.append(f"{inner_name}=lambda env, a, spec, emit: [emit(k, v) for k, v in _{inner_name}(a).items()]")
    args = "".join(f", {k}={v!r}" for k, v in params.items())
    lines += [
        "def run(d):  # the plug-in's call with what it expects of its caller: env (phase sets the global) and emit",
        f"    env = types.SimpleNamespace(chainer=chainer, xp=np, context={dict(context)!r}, case_seed={seed}, "
        f"calls=types.SimpleNamespace({', '.join(wrapped)}), "
        "phase=lambda name: contextlib.nullcontext(globals().update(phase=name))" + (")" if not model else ","),
        *([f"                                to_device=lambda link: None, espnet=lambda: importlib.import_module("
           f"{ESPNET_EMBED!r}))"] if model else []),
        f"    {name}(env, d, {_plain(spec)!r}, (out := {{}}).__setitem__{args})  # out: what it emits",
        "    return {k: chainer.backend.CpuDevice().send(getattr(v, 'array', v)) for k, v in out.items() "
        "if v is not None}",
    ]
    imports = ("import contextlib", *module_imports)
    return RenderedCall(imports, tuple(lines), "plug-in", name)


def _without_docstrings(src: str) -> str:
    """A function's source without its docstrings (and those of functions inside it)."""
    tree = ast.parse(src)
    cut: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str):
            doc = node.body[0]
            cut |= set(range(doc.lineno, (doc.end_lineno or doc.lineno) + 1))
    return "\n".join(ln for i, ln in enumerate(src.splitlines(), 1) if i not in cut)


def _plain(value: Any) -> Any:
    """A case's spec as plain dicts and lists (it is held read-only)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
