"""The issue text of an exported reproducer: the facts the harness knows, in the library's template.

:func:`issue_for` gathers them -- the script and its output here, what was expected and what happened, the
contracts file's diagnosis (a known defect's reason and reference, or the reason a behaviour is allowed), the
runtime fields of the interpreter that ran it, the conditions, the recipe -- and
:func:`harness.upstream.issue_text.issue_text` writes them in Chainer's or ESPnet's template.
"""

from __future__ import annotations

import os
import sys

from harness.core.compat import PATCHES
from harness.judge.allowance import Allowance, declared_defect
from harness.judge.contracts import load_contracts
from harness.judge.reproducer import Reproducer
from harness.upstream.issue_text import IssueFacts, issue_text, recipe_facts, runtime_fields
from harness.upstream.reproducer import Written
from harness.upstream.script import observed_text

__all__ = ["issue_for", "EXPECTED"]

#: What the call should do, by the check a script makes.
EXPECTED = {
    "error": "the call completes: the input is valid",
    "bad_input": "one of the errors the input's rule names, in its phase",
    "repeats": "the same bits on every run of the same call in one process",
    "processes": "the same bits in every fresh process",
    "contexts": "the same bits under both settings",
    "devices": "the same bits on both devices",
    "relation": "each sequence's outputs the same whatever else is in its batch",
    "tolerance": "values within the tolerance of the same computation in float64",
    "bits": "the bits of the reference",
}


def issue_for(written: Written, r: Reproducer, allowance: Allowance | None = None) -> str:
    """The issue (or behaviour note) text for a script ``export`` wrote and checked."""
    assert written.claim is not None and written.case is not None
    case, claim = written.case, written.claim
    with open(written.script, encoding="utf-8") as fh:
        script = fh.read()
    known = declared_defect(r, load_contracts(r.contracts or None), case.tags)
    if allowance is not None:
        diagnosis = f"Allowed by the harness's contracts, {allowance.cited}"
    elif known is not None:
        diagnosis = known.reason
    else:
        diagnosis = "Not diagnosed yet: the harness found it; no contract declares it."
    last = next((said for ln in reversed(written.output.splitlines()) if (said := observed_text(ln)) is not None),
                "")
    recipe, source = recipe_facts(case.tags)
    library = "espnet" if written.library == "espnet" else "chainer"
    facts = IssueFacts(
        library=library, title=written.title,
        description=written.what, expected=_sentence(EXPECTED.get(claim.check.kind, "")),
        actual=_sentence(last or claim.what),
        script_name=os.path.basename(written.script), script_text=script, output=written.output,
        exit_code=written.exit_code, diagnosis=diagnosis, reference=known.reference if known is not None else "",
        data_name=os.path.basename(written.data) if written.data else "",
        environment=tuple(runtime_fields(sys.executable, dict(os.environ)).items()),
        conditions=(("holds under", claim.conditions),),
        patches=tuple(p.name for p in PATCHES), recipe=recipe, recipe_source=source, note=written.note)
    return issue_text(facts)


def _sentence(text: str) -> str:
    return f"{text[:1].upper()}{text[1:]}" + ("" if text.endswith(".") or not text else ".")
