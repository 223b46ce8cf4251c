"""harness/upstream/issue.py: the issue text of an exported script names what was expected of the check it makes,
what happened (the script's last verdict line) and the harness's diagnosis."""

from __future__ import annotations

from harness.core.cases import Case
from harness.judge.reproducer import Reproducer
from harness.upstream.claims import Claim
from harness.upstream.issue import EXPECTED, issue_for
from harness.upstream.reproducer import Written
from harness.upstream.script import Check

CASE = Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [6]})


def test_the_issue_says_what_was_expected_what_happened_and_that_nothing_declares_it(tmp_path) -> None:
    script = tmp_path / "repro.py"
    script.write_text("import chainer\nprint('REPRODUCED: the bits differ between runs')\n")
    written = Written(str(script), None, 2, "F.embed_id differs run to run", False, "chainer",
                      output="run 1\nREPRODUCED: the bits differ between runs", exit_code=1,
                      claim=Claim(Check("repeats", count=2), {}, "F.embed_id's grad.W differs", "CPU (NumPy)"),
                      case=CASE, what="F.embed_id on 6 ids")
    text = issue_for(written, Reproducer(str(tmp_path / "case.json"), "chainer.embed_id"))
    assert "F.embed_id differs run to run" in text
    assert EXPECTED["repeats"][:1].upper() + EXPECTED["repeats"][1:] in text
    assert "The bits differ between runs." in text
    assert "Not diagnosed yet" in text and "repro.py" in text and "import chainer" in text
