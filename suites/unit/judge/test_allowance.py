"""A note or a defect: the contract's reason that allows a divergence or expects an error, else None."""

from __future__ import annotations

from harness.judge.allowance import allowance_for, declared_defect
from harness.judge.contracts import DEFAULT_CONTRACTS, load_contracts
from harness.judge.reproducer import Reproducer

C = load_contracts(None)
LINES = DEFAULT_CONTRACTS.read_text(encoding="utf-8").splitlines()


def _table_at(source: str) -> str:
    """The TOML table a ``contracts.toml line N`` names: its header and keys up to the next table."""
    n = int(source.rsplit(" ", 1)[1])
    out = [LINES[n - 1]]
    for line in LINES[n:]:
        if line.startswith("[["):
            break
        out.append(line)
    return "\n".join(out)


def test_a_divergence_the_contract_does_not_forbid_is_allowed_by_that_lines_reason():
    r = Reproducer(case="c.json", subject="chainer.embed_id", devices=("gpu:0",), repeats=20,
                   kind="not reproducible run to run")
    a = allowance_for(r, C, ())
    assert a is not None and "atomicAdd" in a.reason and a.what == "reproducible = false"
    table = _table_at(a.source)
    assert table.startswith("[[contract]]") and 'subject = "chainer.embed_id"' in table and '"gpu"' in table
    assert a.reason in table and a.cited.startswith(f"{a.source} (reproducible = false): ")


def test_a_divergence_the_contract_forbids_is_a_defect():
    r = Reproducer(case="c.json", subject="chainer.embed_id", kind="not reproducible run to run")
    assert allowance_for(r, C, ()) is None
    pair = Reproducer(case="c.json", subject="chainer.embed_id", contexts=("default", "blas1"))
    assert allowance_for(pair, C, ()) is None  # identical_across names default


def test_a_cross_context_difference_is_allowed_where_identical_across_leaves_the_other_context_out():
    r = Reproducer(case="c.json", subject="chainer.NStepLSTM", contexts=("blas1", "blas2"),
                   kind="cross-context difference")
    a = allowance_for(r, C, ())
    assert a is not None and "'blas1'" in a.what and "thread count" in a.reason
    debug = Reproducer(case="c.json", subject="chainer.NStepLSTM", contexts=("default", "debug"),
                       kind="cross-context difference")
    assert allowance_for(debug, C, ()) is None  # its debug line requires default's bits


def test_a_trajectory_between_contexts_is_allowed_as_its_context_pair_is():
    """The model lines name no identical_across (one BLAS thread changes step 0's backward): a trajectory between
    default and blas1 is an allowed divergence, exported as a note, as its printed command says."""
    r = Reproducer(case="c.json", subject="model.espnet_rnnlm", contexts=("default", "blas1"),
                   kind="trajectory divergence")
    a = allowance_for(r, C, ())
    assert a is not None and "'default'" in a.what and a.source.startswith("contracts.toml line")


def test_an_error_a_bad_input_rule_names_is_expected_and_another_is_not():
    r = Reproducer(case="c.json", subject="chainer.EmbedID", error="InvalidType in forward", kind="expected error")
    a = allowance_for(r, C, ("bad:float_ids",))
    assert a is not None and a.what == "raises InvalidType in forward" and "bad:float_ids" in a.source
    other = Reproducer(case="c.json", subject="chainer.EmbedID", error="IndexError in forward", kind="error")
    assert allowance_for(other, C, ("bad:float_ids",)) is None
    late = Reproducer(case="c.json", subject="chainer.EmbedID", error="InvalidType in backward", kind="error")
    assert allowance_for(late, C, ("bad:float_ids",)) is None  # the rule says forward


def test_a_known_defect_is_no_note_and_its_declaration_gives_the_diagnosis_in_every_context():
    for ctx in ("default", "blas1"):
        r = Reproducer(case="c.json", subject="espnet.EmbedID", contexts=(ctx,), error="ValueError in backward",
                       kind="known library defect")
        assert allowance_for(r, C, ("ids:empty",)) is None
        d = declared_defect(r, C, ("ids:empty",))
        assert d is not None and "gy.reshape(x.size, -1)" in d.reason and "numpy/issues" in d.reference
        assert _table_at(f"x line {d.line}").startswith("[[known_defect]]")
    new = Reproducer(case="c.json", subject="espnet.EmbedID", error="ValueError in backward")
    assert declared_defect(new, C, ("ids:small",)) is None  # not declared for these inputs: a new defect
