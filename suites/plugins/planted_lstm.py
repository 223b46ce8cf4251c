"""A planted regression, for timing the gate when it fails: ``chainer.NStepLSTM`` with its ``hy`` perturbed.

Load it with ``--subject-plugin suites.plugins.planted_lstm:SUBJECTS`` into a pytest session
(``python -m pytest --subject-plugin ... suites/gate/test_lstm.py``) or a campaign: the printed replay commands then
load it too. As a plain pytest plugin (``-p suites.plugins.planted_lstm``) it replaces the subject all the same,
and the dossiers say that no command reproduces it. ``$HARNESS_PLANTED`` says how:

- ``scale`` (default): ``hy`` times 1.01, the same every run: beyond the oracle's tolerance on every example;
- ``noise``: one element of ``hy`` moved by one ULP in a direction drawn from the OS's entropy on every run:
  not reproducible run to run, as a racing kernel is (Hypothesis then cannot replay a failure reliably).

The other subjects are untouched. The call is ``planted_calls.nsteplstm_perturbed`` (the shipped ``lstm_link``
with ``hy`` perturbed as it is recorded). Not part of the harness.
"""

from __future__ import annotations

import dataclasses
import os

from harness.subjects.call_runs import call_run
from harness.subjects.registry import get_subject, register
from suites.plugins import planted_calls

__all__ = ["SUBJECTS"]

_ORIGINAL = get_subject("chainer.NStepLSTM")
_MODE = os.environ.get("HARNESS_PLANTED", "scale")


SUBJECTS = (dataclasses.replace(_ORIGINAL, run=call_run(planted_calls.nsteplstm_perturbed, mode=_MODE),
                                description=f"NStepLSTM with hy perturbed ({_MODE})"),)
register(SUBJECTS[0], replace=True)  # as a pytest plugin (-p), importing it is the whole set-up
