"""A planted regression, for timing the gate when it fails: ``chainer.NStepLSTM`` with ``hy`` scaled by 1.01.

Load it into a pytest session as a plugin (``python -m pytest -p suites.plugins.planted_lstm suites/test_gate_lstm.py``)
or into a campaign (``--subject-plugin suites.plugins.planted_lstm:SUBJECTS``). Every example of NStepLSTM is then
beyond the oracle's tolerance, deterministically, so the gate fails on every example it draws; the other
subjects are untouched. Not part of the harness.
"""

from __future__ import annotations

import dataclasses

from harness.subjects.registry import get_subject, register

__all__ = ["SUBJECTS"]

_ORIGINAL = get_subject("chainer.NStepLSTM")


def _perturbed(case, device, context, rec):  # type: ignore[no-untyped-def]
    _ORIGINAL.run(case, device, context, rec)
    hy = rec._outputs.get("hy")  # the recorded output, scaled in place of a real regression
    if hy is not None:
        rec._outputs["hy"] = getattr(hy, "array", hy) * 1.01


SUBJECTS = (dataclasses.replace(_ORIGINAL, run=_perturbed, description="NStepLSTM with hy scaled by 1.01"),)
register(SUBJECTS[0], replace=True)  # as a pytest plugin (-p), importing it is the whole set-up
