"""Retention of old run directories under ``reports/``: only finished, idle runs are deleted, the newest kept.

A run is finished once its report wrote :data:`FINISHED` (last); a run whose ``.lock`` another process holds is
never touched, and the lock is held while a run is deleted.
"""

from __future__ import annotations

import os
import re
import shutil

__all__ = ["prune_reports", "FINISHED"]


_RUN_DIR = re.compile(r"^\d{8}T\d{6}Z-\d+$")


def prune_reports(base: str = "reports", keep: int = 10) -> list[str]:
    """Delete the oldest run directories of ``base`` beyond the newest ``keep`` (run directories only: names
    like ``20261202T215718Z-1234``; never ``README.md``, ``baselines/``, ``latest`` or what it points to).

    Only finished, idle runs go: a directory without its finished marker (:data:`FINISHED`, written last by a
    report) or whose ``.lock`` another process holds (a report running, or being resumed, now) is kept, and
    the lock is held while it is deleted so that no run can start writing into it meanwhile. Returns what
    was deleted."""
    if keep < 0:
        from harness.core.errors import InvalidArgument

        raise InvalidArgument(f"keep={keep} must be >= 0")
    if not os.path.isdir(base):
        return []
    latest = os.path.realpath(os.path.join(base, "latest"))
    runs = sorted(n for n in os.listdir(base) if _RUN_DIR.match(n) and os.path.isdir(os.path.join(base, n))
                  and not os.path.islink(os.path.join(base, n)))
    finished = [n for n in runs if os.path.exists(os.path.join(base, n, FINISHED))]
    doomed = [n for n in finished[:max(len(finished) - keep, 0)]
              if os.path.realpath(os.path.join(base, n)) != latest]
    gone = []
    for n in doomed:
        if _remove_if_idle(os.path.join(base, n)):
            gone.append(n)
    return gone


#: The file a report writes last into its run directory: a directory without it is not finished (running,
#: interrupted, or being resumed) and is never pruned.
FINISHED = "timings.json"


def _remove_if_idle(path: str) -> bool:
    """Delete ``path`` only while holding its ``.lock`` (non-blocking): a run holding it is left alone."""
    import fcntl

    lock = os.path.join(path, ".lock")
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        fd = None  # a run that never locked (an old report): nothing can be writing into it through the lock
    except OSError:
        return False
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # in use
            if not os.path.exists(os.path.join(path, FINISHED)):
                return False  # a resume took it and removed the marker before we locked
        shutil.rmtree(path)
        return True
    finally:
        if fd is not None:
            os.close(fd)
