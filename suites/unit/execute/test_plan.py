"""harness/execute/plan.py: every applicable task once, oracles only where they judge, relation members only in
their contexts, GPU tasks planned (to be skipped rows) where no GPU runs, and shards decided by case id.

The plan: a model case (a training run) is planned in the trajectory pair of contexts and in those its contract
requires identity to, not in every context of the campaign."""

from __future__ import annotations

from harness.core.cases import Case
from harness.core.contexts import get_context
from harness.core.devices import CPU, Device
from harness.core.model_cases import TRAJECTORY_CONTEXTS
from harness.execute.plan import Task, group_key, plan, shard, task_key
from harness.generate.model_cases import model_case
from harness.judge.contracts import load_contracts
from harness.subjects.registry import get_subject

EMBED = Case("embed", 1, {"vocab": 5, "width": 3, "ids_shape": [4]})
LSTM = Case("lstm", 2, {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]})
CTX = [get_context("default"), get_context("debug")]


def test_each_subject_gets_the_cases_of_its_family_and_oracles_run_in_the_oracle_contexts_only() -> None:
    subjects = [get_subject("chainer.embed_id"), get_subject("oracle.embed")]
    tasks = plan([EMBED, LSTM], subjects, [CPU], CTX)
    got = {(t.case.id, t.subject, t.context) for t in tasks}
    assert got == {(EMBED.id, "chainer.embed_id", "default"), (EMBED.id, "chainer.embed_id", "debug"),
                   (EMBED.id, "oracle.embed", "default")}
    assert tasks[0].subject == "oracle.embed"  # what judges runs first
    assert len(tasks) == len(set(t.key for t in tasks))


def test_a_gpu_asked_for_gets_tasks_and_a_cpu_only_context_none_there() -> None:
    tasks = plan([EMBED], [get_subject("chainer.embed_id")], [CPU, Device("gpu", 0)],
                 [get_context("default"), get_context("blas1")])
    assert {(t.device, t.context) for t in tasks} == {("cpu", "default"), ("gpu:0", "default"), ("cpu", "blas1")}


def test_a_contract_that_asks_for_the_oracle_brings_it_in() -> None:
    without = plan([EMBED], [get_subject("chainer.embed_id")], [CPU], CTX[:1])
    with_contracts = plan([EMBED], [get_subject("chainer.embed_id")], [CPU], CTX[:1], contracts=load_contracts())
    assert {t.subject for t in without} == {"chainer.embed_id"}
    assert "oracle.embed" in {t.subject for t in with_contracts}


def test_keys_are_stable_and_shards_split_by_id_alike_anywhere() -> None:
    t = Task(EMBED, "chainer.embed_id", "cpu", "default")
    assert t.key == task_key(EMBED.id, "chainer.embed_id", "cpu", "default")
    assert t.key == f"{EMBED.id}|chainer.embed_id|cpu|default"
    cases = [Case("embed", s, {"vocab": 5, "width": 3, "ids_shape": [4]}) for s in range(12)]
    parts = [shard(cases, i, 3) for i in (1, 2, 3)]
    assert sorted(c.id for p in parts for c in p) == sorted(c.id for c in cases)
    assert all(int(c.id, 16) % 3 == i for i, p in enumerate(parts) for c in p)


def test_contexts_differing_only_at_run_time_share_a_worker_group() -> None:
    def key(ctx: str) -> tuple:
        return group_key(Task(EMBED, "chainer.embed_id", "cpu", ctx))

    assert key("default") == key("blas1") == key("debug")
    assert key("hashseed") != key("default")


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
