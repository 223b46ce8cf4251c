"""The folders are the stages, and imports point only downward (README, "Architecture")."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "harness"

#: What each folder may import (itself included). Top-level modules (cli, pytest_plugin, __main__) may import anything.
ALLOWED = {
    "core": {"core"},
    "generate": {"core", "generate"},
    "subjects": {"core", "subjects"},
    "judge": {"core", "judge"},
    "execute": {"core", "generate", "subjects", "judge", "execute"},
    "outputs": {"core", "generate", "subjects", "judge", "execute", "outputs"},
}


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every ``harness.<folder>`` a module imports, eagerly or inside a function."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "harness"]
        for n in names:
            parts = n.split(".")
            if parts[0] == "harness" and len(parts) > 1:
                out.append((node.lineno, parts[1]))
    return out


def _modules() -> list[pathlib.Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p.parent != ROOT)


def test_every_module_lives_in_a_stage_folder() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py", "pytest_plugin.py"], top
    folders = sorted({p.relative_to(ROOT).parts[0] for p in _modules()})
    assert folders == sorted(ALLOWED), folders


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_downward(path: pathlib.Path) -> None:
    folder = path.relative_to(ROOT).parts[0]
    bad = [f"{path.relative_to(ROOT)}:{line} imports harness.{target}"
           for line, target in _imports(path)
           if target not in ALLOWED[folder] and target not in ("__init__",)]
    assert not bad, "\n".join(bad)


def test_nothing_imports_the_command_line() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}" for p in _modules() for line, t in _imports(p)
           if t in ("cli", "pytest_plugin")]
    assert not bad, bad
