"""The plan: a model case (a training run) is planned in the trajectory pair of contexts and in those its contract
requires identity to, not in every context of the campaign."""

from __future__ import annotations

from harness.core.contexts import get_context
from harness.core.devices import CPU
from harness.core.model_cases import TRAJECTORY_CONTEXTS
from harness.execute.plan import plan
from harness.generate.model_cases import model_case
from harness.judge.contracts import load_contracts
from harness.subjects.registry import get_subject

CONTEXTS = [get_context(c) for c in ("default", "blas1", "blas2", "debug")]


def _planned(contracts, case):
    return sorted((t.subject, t.context) for t in plan([case], [get_subject("model.espnet_rnnlm"),
                                                                get_subject("espnet.EmbedID")],
                                                       [CPU], CONTEXTS, contracts=contracts))


def test_a_model_case_runs_in_the_trajectory_pair_of_contexts_only():
    case = model_case("espnet_rnnlm", "ci", seed=1)
    assert _planned(load_contracts(None), case) == sorted(("model.espnet_rnnlm", c) for c in TRAJECTORY_CONTEXTS)


def test_a_context_the_contract_requires_identity_to_is_planned_too(tmp_path):
    path = tmp_path / "contracts.toml"
    path.write_text('[[contract]]\nsubject = "model.espnet_rnnlm"\ndevice = "cpu"\ncontext = "*"\n'
                    'reproducible = true\nacross_processes = true\nidentical_across = ["debug"]\n'
                    'oracle = "record"\nreason = "a test"\n')
    case = model_case("espnet_rnnlm", "ci", seed=1)
    planned = _planned(load_contracts(path), case)
    assert planned == sorted(("model.espnet_rnnlm", c) for c in (*TRAJECTORY_CONTEXTS, "debug"))
