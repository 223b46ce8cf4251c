"""A campaign's options (how it repeats and isolates runs) and the lanes ``jobs=0`` means.

Apart from :mod:`harness.execute.campaign` so that the command line's parser can show these defaults in
``--help`` without importing NumPy, Chainer's workers or the judges: a usage error is then a few hundredths
of a second, not a third of one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.core.errors import InvalidArgument

__all__ = ["CampaignOptions", "JOBS_ENV", "MAX_DEFAULT_JOBS", "default_jobs"]


@dataclass(frozen=True)
class CampaignOptions:
    """How a campaign repeats and isolates runs (frozen: a change is a new record, :func:`dataclasses.replace`)."""

    repeats: int = 5
    fresh: int = 2
    #: Seconds one run may take before its worker is killed; None: scaled with each case's estimated work
    #: (:func:`harness.execute.admission.timeout`).
    timeout: float | None = None
    plugins: tuple[str, ...] = ()
    quiet: bool = False
    #: Lanes run on this machine at once, each with its own workers (0: :func:`default_jobs`). They change
    #: when a task runs, never what it runs in: every task still gets R runs in one pooled worker and K in
    #: fresh ones.
    jobs: int = 0
    #: The bytes a run of one case may need at its peak (a user's ``--max-case-bytes``); None: the default of
    #: :func:`harness.core.cost.memory_limit`. A case over it is a ``skipped`` row saying so.
    max_case_bytes: int | None = None

    def __post_init__(self) -> None:
        # The command line's parser checks these with the same functions; a campaign.json is checked by its
        # schema. This is for settings made in code (tools, tests): the rules are argcheck's, not repeated here.
        from harness.core import argcheck

        argcheck.int_at_least("repeats", self.repeats, 1)
        argcheck.int_at_least("fresh", self.fresh, 0)
        if self.timeout is not None:
            argcheck.positive_seconds("timeout", self.timeout)
        argcheck.int_at_least("jobs", self.jobs, 0)
        argcheck.int_at_least("max-case-bytes", self.max_case_bytes, 1)

    def lanes(self) -> int:
        """The number of lanes :attr:`jobs` asks for."""
        return self.jobs or default_jobs()


#: The most lanes ``jobs=0`` gives: each lane holds a pooled worker with Chainer imported (the K fresh ones
#: are shared by the lanes of an environment).
#: Runs a localization compares where its reproducer names one device, one context and no relation.
LOCALIZE_REPEATS = 3

MAX_DEFAULT_JOBS = 4


#: Environment variable: the lanes ``jobs=0`` means (a pytest-xdist worker sets 1: the workers are the lanes).
JOBS_ENV = "HARNESS_JOBS"


def default_jobs() -> int:
    """``$HARNESS_JOBS`` where set, else one lane per CPU this process may run on, at most
    :data:`MAX_DEFAULT_JOBS`."""
    text = os.environ.get(JOBS_ENV)
    if text:
        from harness.core import argcheck

        try:
            value = int(text)
        except ValueError:
            raise InvalidArgument(f"{JOBS_ENV}={text!r} must be an integer >= 1") from None
        return int(argcheck.int_at_least(JOBS_ENV, value, 1, argcheck.LIMITS["jobs"][0]) or 1)
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_DEFAULT_JOBS))
