"""Each word list of the harness (families, phases, relations, roles) is written once, in
harness/core/vocabulary.py: no other module of the harness spells the same list out again."""

from __future__ import annotations

import ast
import pathlib
import re

from harness.core import vocabulary

HARNESS = pathlib.Path(vocabulary.__file__).resolve().parents[1]
LISTS = {name: frozenset(getattr(vocabulary, name)) for name in
         ("FAMILIES", "PHASES", "COMPUTE_PHASES", "RELATIONS", "ROLES")}


_NAMED = re.compile(r"famil|phase|relation|role", re.IGNORECASE)


def _words(node: ast.AST) -> frozenset[str] | None:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return frozenset(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _as_vocabulary(node: ast.AST) -> list[tuple[int, str]]:
    words = _words(node)
    return [] if words is None else [(node.lineno, n) for n, vocab in LISTS.items() if words == vocab]


def spelled_out(source: str) -> list[tuple[int, str]]:
    """(line, vocabulary name) for each literal list in ``source`` that holds exactly the words of one of the
    vocabulary's lists where it stands for that list: assigned to a name of that kind (``_FAMILIES = ...``), a
    schema's ``"enum"``, or a parser's ``choices=``. (A table's row that happens to hold every family, "this
    input applies to embed, lstm and pipeline", is a fact about that row, not the list of families.)"""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(isinstance(t, ast.Name) and _NAMED.search(t.id) for t in targets):
                out += _as_vocabulary(node.value)
        elif isinstance(node, ast.Dict):
            out += [hit for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and k.value == "enum" for hit in _as_vocabulary(v)]
        elif isinstance(node, ast.keyword) and node.arg == "choices":
            out += _as_vocabulary(node.value)
    return sorted(out)


def test_no_module_spells_out_a_vocabulary_list_again():
    me = pathlib.Path(vocabulary.__file__).resolve()
    again = [f"{p.relative_to(HARNESS)}:{line} spells out {name}" for p in sorted(HARNESS.rglob("*.py"))
             if p.resolve() != me for line, name in spelled_out(p.read_text(encoding="utf-8"))]
    assert not again, "\n".join(again)


def test_a_list_spelled_out_again_is_found():
    src = ('ROLES = ("subject", "oracle", "control")\n'
           'applies = {"nan_w": ("lstm", "embed", "pipeline")}\n'
           'schema = {"enum": ["alone", "subbatch", "order", "padding", "duplicate"]}\n'
           'p.add_argument("--family", choices=["pipeline", "lstm", "embed"])\n'
           '_families = ("embed", "all")\n')
    assert spelled_out(src) == [(1, "ROLES"), (3, "RELATIONS"), (4, "FAMILIES")]


def test_the_phases_that_compute_are_run_phases_in_run_order():
    assert [p for p in vocabulary.PHASES if p in vocabulary.COMPUTE_PHASES] == list(vocabulary.COMPUTE_PHASES)
    assert set(vocabulary.PHASE_SPELLINGS.values()) <= set(vocabulary.PHASES)
    assert vocabulary.phase_name("double_backward") == "double-backward" == vocabulary.phase_name("double-backward")
