"""The folders are the stages, and imports point only downward (README, "Architecture").

An import is every way a module reaches another: ``import``/``from ... import`` statements (at the top or
inside a function body, relative ones resolved), ``importlib.import_module("...")``/``__import__("...")`` and
``runpy.run_module("...")`` (bare names too: ``run_module("harness")`` runs ``harness/__main__.py``, the command
line), and a dotted module name as a string argument of any call (``importlib.import_module("harness.verbs.export")``).
On that graph: no stage imports a later one, no module of ``harness/`` imports ``tools/``, and no two modules
import each other through any chain (a circle, inside a stage or across).
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re

import pytest

HARNESS = pathlib.Path(__file__).resolve().parents[2] / "harness"
ROOT = HARNESS.parent

#: What each folder may import (itself included). Top-level modules (cli, pytest_plugin, __main__) may
#: import anything.
ALLOWED = {
    "core": {"core"},
    "generate": {"core", "generate"},
    "subjects": {"core", "subjects"},
    "judge": {"core", "judge"},
    "execute": {"core", "generate", "subjects", "judge", "execute"},
    "outputs": {"core", "generate", "subjects", "judge", "execute", "outputs"},
    "upstream": {"core", "generate", "subjects", "judge", "execute", "upstream"},
    "verbs": {"core", "generate", "subjects", "judge", "execute", "outputs", "upstream", "verbs"},
}

_MODULE_NAME = re.compile(r"^(harness|tools)(\.[A-Za-z_][A-Za-z0-9_]*)+$")
#: Calls whose string argument is a module, dotted or bare; ``run_module`` runs a package's ``__main__``.
_IMPORT_CALLS = {"import_module", "__import__", "run_module"}
#: What reaches the command line: the package run as a program, its entry module, the parser, its option table, the
#: pytest plug-in.
COMMAND_LINE = ("harness", "harness.__main__", "harness.cli", "harness.pytest_plugin")


def _name_of(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> list[pathlib.Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if p.parent != HARNESS)


ALL = {_name_of(p): p for p in HARNESS.rglob("*.py")}


def _resolve(name: str) -> str:
    """The module a dotted name lands in: itself where it is a module, else its longest module prefix
    (``harness.core.env.fingerprint`` -> ``harness.core.env``)."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in ALL or cand.split(".")[0] != "harness":
            return cand
        parts.pop()
    return name


@functools.lru_cache(maxsize=None)  # several tests read every module's imports; parse each file once
def imports_of(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, with the line: statements anywhere, import calls and string imports."""
    return imports_in(path.read_text(encoding="utf-8"), _name_of(path), path.name == "__init__.py")


def imports_in(source: str, me: str, is_package: bool = False) -> list[tuple[int, str]]:
    """:func:`imports_of` for the source of module ``me``, in the order of the source."""
    package = me if is_package else me.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                full = f"{base}.{a.name}"
                out.append((node.lineno, full if full in ALL else base))
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    continue
                main = f"{arg.value}.__main__"
                if fname in _IMPORT_CALLS:
                    out.append((node.lineno, main if fname == "run_module" and main in ALL else arg.value))
                elif _MODULE_NAME.match(arg.value) and _resolve(arg.value) != "harness":
                    out.append((node.lineno, arg.value))  # a dotted name of a module (not a label like it)
    return sorted((line, _resolve(n)) for line, n in out if n.split(".")[0] in ("harness", "tools"))


def graph() -> dict[str, list[str]]:
    """Module -> the harness modules it imports (built when a test asks: collection parses no file)."""
    return {name: sorted({t for _, t in imports_of(p) if t in ALL and t != "harness"}) for name, p in ALL.items()}


def test_every_module_lives_in_a_stage_folder() -> None:
    top = sorted(p.name for p in HARNESS.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py", "pytest_plugin.py"], top
    folders = sorted({p.relative_to(HARNESS).parts[0] for p in _modules()})
    assert folders == sorted(ALLOWED), folders


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_imports_point_downward(path: pathlib.Path) -> None:
    folder = path.relative_to(HARNESS).parts[0]
    bad = [f"{path.relative_to(HARNESS)}:{line} imports {target}"
           for line, target in imports_of(path)
           if target.startswith("harness.") and target.split(".")[1] not in ALLOWED[folder]]
    assert not bad, "\n".join(bad)


def test_nothing_in_harness_imports_tools() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line} imports {t}" for p in ALL.values() for line, t in imports_of(p)
           if t == "tools" or t.startswith("tools.")]
    assert not bad, bad


def command_line_imports(imports: list[tuple[int, str]]) -> list[int]:
    """The lines of ``imports`` that reach the command line (:data:`COMMAND_LINE`)."""
    return [line for line, t in imports if t in COMMAND_LINE]


def test_nothing_imports_the_command_line() -> None:
    bad = [f"{p.relative_to(HARNESS)}:{line}" for p in _modules() for line in command_line_imports(imports_of(p))]
    assert not bad, bad


def test_a_bare_name_import_of_the_command_line_is_caught() -> None:
    """A module that runs or imports the package by its bare name reaches the command line as surely as
    ``import harness.cli`` does; a planted one is caught on each of its lines."""
    src = ("import importlib, runpy\n"
           "def f():\n"
           "    runpy.run_module('harness', run_name='__main__', alter_sys=True)\n"
           "    importlib.import_module('harness')\n"
           "    __import__('harness')\n"
           "    return runpy.run_module(mod_name='harness')\n"
           "def g():\n"
           "    return importlib.import_module('harness.execute.worker')\n")
    imports = imports_in(src, "harness.execute.probe")
    assert ("harness.__main__" in {t for _, t in imports}), imports
    assert command_line_imports(imports) == [3, 4, 5, 6], imports


def circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_circle_of_imports() -> None:
    found = circles(graph())
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_the_graph_sees_hidden_imports() -> None:
    """The reader must see what a plain ``import`` scan misses, or the tests above would pass vacuously."""
    src = ("import importlib\n"
           "def f():\n"
           "    from harness.outputs import fleet\n"
           "    importlib.import_module('harness.outputs.report')\n"
           "    return __import__('tools.bench')\n"
           "from . import gate\n")
    got = [t for _, t in imports_in(src, "harness.outputs.probe")]
    assert got == ["harness.outputs.fleet", "harness.outputs.report", "tools.bench", "harness.outputs.gate"], got
    assert circles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert circles({"a": ["a"]}) == [["a"]] and circles({"a": ["b"], "b": []}) == []



#: Unit test files about the package as a whole, not one module of it: this file (stages, imports, the mirror).
WHOLE_PACKAGE = ("test_layers.py",)


def stray_unit_tests(unit: pathlib.Path, package: pathlib.Path) -> list[str]:
    """The ``test_<module>.py`` files under ``unit`` whose ``<stage>/<module>`` is no module (or package) of
    ``package`` (the files of :data:`WHOLE_PACKAGE` at the top of ``unit`` aside)."""
    stray = []
    for path in sorted(unit.rglob("test_*.py")):
        if path.parent == unit and path.name in WHOLE_PACKAGE:
            continue
        target = package / path.relative_to(unit).with_name(path.stem.removeprefix("test_"))
        if not (target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()):
            stray.append(str(path.relative_to(unit)))
    return stray


def unmirrored_modules(unit: pathlib.Path, package: pathlib.Path) -> list[str]:
    """The modules of ``package`` (every ``.py`` file but ``__init__.py``) with no ``test_<module>.py`` at the same
    place under ``unit``: ``core/cases.py`` needs ``unit/core/test_cases.py``, ``cli.py`` needs ``unit/test_cli.py``."""
    return [str(p.relative_to(package)) for p in sorted(package.rglob("*.py"))
            if p.name != "__init__.py" and not (unit / p.relative_to(package)).with_name(f"test_{p.name}").is_file()]


def test_the_unit_tests_mirror_the_package() -> None:
    """``suites/unit/<stage>/test_<module>.py`` tests ``harness/<stage>/<module>.py`` (or its package): a unit test
    file named after no module is a test a reader cannot find from the code."""
    stray = stray_unit_tests(ROOT / "suites" / "unit", HARNESS)
    assert not stray, f"unit test files that mirror no module of harness/: {stray}"


def test_every_module_has_its_unit_test_file() -> None:
    """Each module's tests are where a reader of the module looks for them; a module without that file is a module
    whose tests, if any, a reader cannot find."""
    missing = unmirrored_modules(ROOT / "suites" / "unit", HARNESS)
    assert not missing, f"modules of harness/ without suites/unit/<stage>/test_<module>.py: {missing}"


def test_the_mirror_check_fails_both_ways(tmp_path: pathlib.Path) -> None:
    pkg, unit = tmp_path / "pkg", tmp_path / "unit"
    for p in (pkg / "core" / "cases.py", pkg / "core" / "untested.py", pkg / "judge" / "__init__.py",
              pkg / "cli.py", unit / "core" / "test_cases.py", unit / "test_judge.py", unit / "test_cli.py",
              unit / "core" / "test_nothing_here.py", unit / "test_layers.py", unit / "core" / "test_layers.py"):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    assert stray_unit_tests(unit, pkg) == ["core/test_layers.py", "core/test_nothing_here.py"]
    assert unmirrored_modules(unit, pkg) == ["core/untested.py"]
    (unit / "core" / "test_untested.py").write_text("")
    (unit / "test_cli.py").unlink()
    assert unmirrored_modules(unit, pkg) == ["cli.py"]
