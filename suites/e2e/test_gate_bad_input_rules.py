"""The campaign gate, run as a user runs it, judges bad inputs and accumulation order in full: four planted
regressions (``suites/plugins/badinput.py``) each turn ``python -m harness gate --devices cpu`` red without a
baseline, naming the rule; the same subject unmodified keeps it green on the same corpus and contracts."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.cases import Case
from harness.core.corpus_files import load_corpus
from harness.generate.corpora import anchor_cases
from harness.generate.sampler import bad_corpus
from suites.plugins.badinput import NAME

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "suites.plugins.badinput"
#: The subject the planted one stands in for: it joins every rule and known defect that names it...
LIKE = "chainer.embed_id"
#: ... except the embeddings' NaN/Inf "no_error" rules: there it is governed by the "*" any rule, as an
#: unnamed subject is (the CONTEXT_ANY plant needs a rule with no documented semantics).
NOT_JOINED = ("bad:nan_inf_w", "bad:nan_inf_input")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _contracts_with_planted(shipped: str) -> str:
    """The shipped contracts with ``planted.embed_id`` wherever ``chainer.embed_id`` is named in a subjects list
    (but the NaN/Inf no_error rules) and a copy of ``chainer.embed_id``'s CPU contract line."""
    blocks = shipped.split("\n[[")
    out = [blocks[0]]
    for b in blocks[1:]:
        block = "[[" + b
        if block.startswith("[[contract]]") and f'subject = "{LIKE}"' in block and 'device = "cpu"' in block:
            out.append(block)
            out.append(block.replace(f'subject = "{LIKE}"', f'subject = "{NAME}"'))
            continue
        if not any(f'tag = "{t}"' in block for t in NOT_JOINED):
            block = block.replace(f'"{LIKE}",', f'"{LIKE}", "{NAME}",')
        out.append(block)
    return "\n".join(out)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("badinput_gate")
    corpus = d / "corpus.jsonl"
    # Valid cases as a user writes them...
    r = subprocess.run([sys.executable, "-m", "harness", "cases", "--family", "embed", "--examples", "2",
                        "--seed", "3", "--out", str(corpus)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    # ... plus the collision anchor (the positive control diverges there; repeated ids make order matter) and
    # one bad input of each kind the plants touch.
    extra: list[Case] = [c for c in anchor_cases() if "collision" in c.tags and c.seed == 11]
    wanted = {"bad:id_out_of_range_high", "bad:id_out_of_range_negative", "bad:nan_inf_w"}
    for c in bad_corpus(examples=40, seed=2, family="embed"):
        kind = next(t for t in c.tags if t.startswith("bad:"))
        if kind in wanted and c.spec.get("w_dtype", "float32") == "float32":
            wanted.discard(kind)
            extra.append(c)
    assert not wanted, f"no bad case of kind {wanted} drawn"
    with open(corpus, "a", encoding="utf-8") as f:
        f.write("".join(c.to_json() + "\n" for c in extra))
    contracts = d / "contracts.toml"
    contracts.write_text(_contracts_with_planted((ROOT / "contracts.toml").read_text()))
    return {"dir": d, "corpus": corpus, "contracts": contracts}


def _gate(setup: dict[str, Path], obj: str) -> tuple[int, str, list[dict]]:
    out = setup["dir"] / f"gate-{obj}"
    r = subprocess.run([sys.executable, "-m", "harness", "gate", "--devices", "cpu", "--corpus", str(setup["corpus"]),
                        "--contracts", str(setup["contracts"]), "--subject-plugin", f"{PLUGIN}:{obj}",
                        "--out", str(out), "--quiet"], cwd=ROOT, env=_env(), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    found = json.loads((out / "violations.json").read_text())
    return r.returncode, r.stdout + r.stderr, found


def _reproduces(text: str) -> None:
    """The first printed ``Reproduce:`` command, run as printed (in a shell, from the project root), exits 1."""
    line = next((ln for ln in text.splitlines() if ln.startswith("Reproduce: ")), None)
    assert line is not None, text
    cmd = line[len("Reproduce: "):]
    python, rest = cmd.split(" ", 1)
    assert python.endswith("python") and rest.startswith("-m harness replay "), cmd
    r = subprocess.run(f"{shlex.quote(sys.executable)} {rest}", shell=True, cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, f"{cmd}\n{r.stdout}{r.stderr}"


def _case_tag(setup: dict[str, Path], case_id: str) -> set[str]:
    """The tags of a case of the corpus given (empty for the invariance relations' member cases)."""
    return next((set(c.tags) for c in load_corpus(str(setup["corpus"])) if c.id == case_id), set())


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_pristine_planted_subject_keeps_the_gate_green(setup):
    rc, text, found = _gate(setup, "PRISTINE")
    assert rc == 0 and found == [], text
    # ... and the checks the plants must trip did run on it (a gate that cannot fail is no gate).
    measures = [json.loads(line)
                for line in (setup["dir"] / "gate-PRISTINE" / "measures.jsonl").read_text().splitlines()]
    mine = [m for m in measures if m["subject"] == NAME]
    assert any(m["kind"] == "order" and m.get("verdict") == "bit-identical" for m in mine)
    negative = [m for m in mine
                if m["kind"] == "oracle" and "bad:id_out_of_range_negative" in _case_tag(setup, m["case_id"])]
    assert negative and all(m["verdict"] == "within tolerance" for m in negative)
    assert any(m["kind"] == "task" and m.get("verdict") == "expected error"
               and "IndexError in forward" in m.get("actual", "") for m in mine)
    assert any(m["kind"] == "context" and "any outcome" in m.get("rule", "") for m in mine)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_forward_that_clips_high_ids_while_backward_raises_is_red(setup):
    rc, text, found = _gate(setup, "CLIP_HIGH")
    assert rc == 1, text
    assert {v["subject"] for v in found} == {NAME}, text
    moved = [v for v in found if v["kind"] == "task" and "bad:id_out_of_range_high" in _case_tag(setup, v["case_id"])]
    assert moved, text
    v = moved[0]
    assert "raise IndexError in forward" in v["rule"]
    assert v["detail"].startswith("expected IndexError in forward, forward returned y (shape ")
    assert v["detail"].endswith("IndexError raised in backward")
    assert "bad input must: raise IndexError in forward" in text  # the dossier names the rule
    _reproduces(text)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_forward_that_clips_negative_ids_is_red(setup):
    rc, text, found = _gate(setup, "CLIP_NEGATIVE")
    assert rc == 1, text
    assert {v["subject"] for v in found} == {NAME}, text
    wrong = [v for v in found if v["kind"] == "oracle" and v["tensor"] == "y"]
    assert wrong and all("bad:id_out_of_range_negative" in _case_tag(setup, v["case_id"]) for v in found), text
    assert wrong[0]["rule"] == "oracle = within: error within tolerance" and wrong[0]["rule"] in text
    _reproduces(text)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_any_rule_whose_outcome_changes_between_contexts_is_red(setup):
    rc, text, found = _gate(setup, "CONTEXT_ANY")
    assert rc == 1, text
    assert {v["subject"] for v in found} == {NAME}, text
    changed = [v for v in found if v["kind"] == "context" and v["context"] == "blas1"]
    assert changed, text
    v = changed[0]
    assert "any outcome, the same in context default" in v["rule"] and "bad:nan_inf_w" in v["rule"]
    assert v["other"] == "default" and "--contexts default,blas1" in text
    assert v["actual"] == "FloatingPointError in forward" and v["expected"].startswith("values ")
    assert v["rule"] in text
    _reproduces(text)


@pytest.mark.slow  # seconds of whole harness process trees: CI runs it, `make test` leaves it out
def test_subject_declaring_sequential_order_that_sums_in_reverse_is_red(setup):
    rc, text, found = _gate(setup, "REVERSED")
    assert rc == 1, text
    assert {v["subject"] for v in found} == {NAME}, text
    assert {v["kind"] for v in found} == {"order"}, text  # deterministic and within tolerance: only order sees it
    v = found[0]
    assert v["tensor"] == "grad.W" and v["other"] == "reference.embed_sequential"
    assert v["detail"].startswith("accumulation order differs from the declared one: "
                                  "first differing element at index (")
    assert "declared accumulation order: bit-identical to the reference summed in that order" in text
    _reproduces(text)
