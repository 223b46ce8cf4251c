"""A planted regression, for timing the gate when it fails: ``chainer.NStepLSTM`` with its ``hy`` perturbed.

Load it with ``--subject-plugin suites.plugins.planted_lstm:SUBJECTS`` into a pytest session
(``python -m pytest --subject-plugin ... suites/test_gate_lstm.py``) or a campaign: the printed replay commands then
load it too. As a plain pytest plugin (``-p suites.plugins.planted_lstm``) it replaces the subject all the same,
and the dossiers say that no command reproduces it. ``$HARNESS_PLANTED`` says how:

- ``scale`` (default): ``hy`` times 1.01, the same every run: beyond the oracle's tolerance on every example;
- ``noise``: one element of ``hy`` moved by one ULP in a direction drawn from the OS's entropy on every run:
  not reproducible run to run, as a racing kernel is (Hypothesis then cannot replay a failure reliably).

The other subjects are untouched. Not part of the harness.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from harness.subjects.registry import get_subject, register

__all__ = ["SUBJECTS"]

_ORIGINAL = get_subject("chainer.NStepLSTM")
_MODE = os.environ.get("HARNESS_PLANTED", "scale")


def _perturbed(case, device, context, rec):  # type: ignore[no-untyped-def]
    _ORIGINAL.run(case, device, context, rec)
    hy = rec._outputs.get("hy")  # the recorded output, perturbed in place of a real regression
    if hy is None:
        return
    hy = np.array(getattr(hy, "array", hy))
    if _MODE == "noise":
        if os.urandom(1)[0] & 1:
            flat = hy.reshape(-1)
            flat[0] = np.nextafter(flat[0], np.asarray(np.inf, dtype=flat.dtype))
    else:
        hy = hy * 1.01
    rec._outputs["hy"] = hy


SUBJECTS = (dataclasses.replace(_ORIGINAL, run=_perturbed, description=f"NStepLSTM with hy perturbed ({_MODE})"),)
register(SUBJECTS[0], replace=True)  # as a pytest plugin (-p), importing it is the whole set-up
