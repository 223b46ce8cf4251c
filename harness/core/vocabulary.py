"""The harness's words, each defined once: case families, run phases, invariance relations, subject roles.

Every module that names one of these imports it from here (the schemas, the contracts, the subjects, the
relations, the verdicts); a new family, phase, relation or role is one line here and its meaning where it
is implemented.
"""

from __future__ import annotations

__all__ = ["FAMILIES", "MODEL_FAMILIES", "CASE_FAMILIES", "PHASES", "COMPUTE_PHASES", "CPU_TIMING", "INPUTS_TIMING",
           "PHASE_SPELLINGS", "RELATIONS", "ROLES", "PROFILES", "phase_name"]

#: The case families: an embedding lookup, a (bi)LSTM stack, an embedding followed by an LSTM.
FAMILIES: tuple[str, ...] = ("embed", "lstm", "pipeline")
#: The families whose case is a training run, many calls in a row (harness.subjects.model): K optimizer steps of
#: a model, judged as a trajectory (harness.judge.trajectory). Not drawn into the one-call corpora.
MODEL_FAMILIES: tuple[str, ...] = ("model",)
#: Every family a case may name.
CASE_FAMILIES: tuple[str, ...] = FAMILIES + MODEL_FAMILIES

#: The phases of one run, in the order a run goes through them (the subjects' Recorder names them).
PHASES: tuple[str, ...] = ("setup", "forward", "backward", "double-backward", "transfer")
#: The phases that run the subject's arithmetic: where its time is counted and where a contract may expect an
#: error to be raised.
COMPUTE_PHASES: tuple[str, ...] = ("forward", "backward", "double-backward")
#: The key of a run's timings that holds the CPU seconds of its compute phases, every thread of the process
#: counted (BLAS's included), beside their wall seconds under each phase's own name: what the subject asked of
#: the machine's cores, where the wall seconds say how long it took.
CPU_TIMING = "cpu"
#: The key of a run's timings that holds the wall seconds the run spent building the case's input arrays
#: (:func:`harness.core.cases.build_arrays`: drawing them, or mapping a shared draw): the harness's work inside
#: the subject's run, never the subject's.
INPUTS_TIMING = "inputs"
#: Other spellings a contracts file may use for a phase, and the phase each one means.
PHASE_SPELLINGS: dict[str, str] = {"double_backward": "double-backward"}

#: The invariance relations (harness.execute.relations implements each): a batch's outputs are the same
#: bits whether a sequence runs alone, in a sub-batch, in another order, with padding, or duplicated.
RELATIONS: tuple[str, ...] = ("alone", "subbatch", "order", "padding", "duplicate")

#: What a subject is for: an implementation under test, a float64 reference, or a control whose behaviour
#: is known by construction (it proves a check can fail, or can pass).
ROLES: tuple[str, ...] = ("subject", "oracle", "control")

#: The generation profiles (harness.generate.profiles implements each): how many and how large the cases are.
PROFILES: tuple[str, ...] = ("ci", "dev", "audit", "realistic")


def phase_name(text: str) -> str:
    """The phase a spelling means (:data:`PHASE_SPELLINGS`), else the text itself."""
    return PHASE_SPELLINGS.get(text, text)
