"""The environment every process that runs subjects starts with, unless the user's environment says otherwise.

This module imports nothing heavy (no NumPy): the pytest plugin applies it before NumPy loads OpenBLAS, which
reads its settings once, when it loads.
"""

from __future__ import annotations

from typing import MutableMapping

__all__ = ["WORKER_ENV_DEFAULTS", "set_worker_defaults"]

#: What every worker process starts with unless this process's environment sets it (see
#: :func:`harness.execute.zygote.worker_env`; the fingerprint records it as a worker sees it), and what the
#: pytest plugin puts into its own process's environment (:func:`set_worker_defaults`).
#:
#: ``OPENBLAS_THREAD_TIMEOUT``: OpenBLAS's idle threads spin for 2**N cycles after each multithreaded product
#: before they sleep; its default N = 28 is a large fraction of a second, which in a campaign burns the idle
#: core after every product. 16 (tens of microseconds) keeps the wall time of 28 and gives the core back; 4, its
#: minimum, is slower (the threads then sleep between the products of one run). The number of threads
#: and how a product is split between them do not change, so neither do the bits (``suites/test_env.py``
#: checks an NStepLSTM run's digests both ways, on a case whose bits depend on 1 against 2 threads).
WORKER_ENV_DEFAULTS: dict[str, str] = {"OPENBLAS_THREAD_TIMEOUT": "16"}


def set_worker_defaults(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Put :data:`WORKER_ENV_DEFAULTS` into ``environ`` where it does not set them (the user's value wins);
    what was set. It changes how OpenBLAS waits only in a process that loads OpenBLAS afterwards, and in every
    process started from it.

    >>> env = {"OPENBLAS_THREAD_TIMEOUT": "28"}
    >>> set_worker_defaults(env), env
    ({}, {'OPENBLAS_THREAD_TIMEOUT': '28'})
    >>> env = {}
    >>> set_worker_defaults(env) == env == WORKER_ENV_DEFAULTS
    True
    """
    added = {k: v for k, v in WORKER_ENV_DEFAULTS.items() if k not in environ}
    environ.update(added)
    return added
