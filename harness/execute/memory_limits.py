"""How much memory a worker may take, and how many bytes of arrays the harness takes from one run.

Memory: each worker's address space is limited (``resource.RLIMIT_AS``, soft limit only) to
``memory_limit`` bytes: the :class:`~harness.execute.worker.Worker` argument, else ``$HARNESS_WORKER_MEMORY``
(bytes; ``0`` or ``none`` for no limit), else half the machine's RAM. A subject that allocates beyond it
gets ``MemoryError`` (an ``error`` row) or, if native code aborts, dies (a ``crashed`` row); the
machine never swaps. The limit is lifted before the first GPU run in a worker: CuPy and the CUDA
driver reserve tens of GiB of virtual address space that is never backed by host memory, so
``RLIMIT_AS`` would refuse them for no reason (a cgroup limit would be the tool there).

Outputs: the harness holds every repetition's arrays in its own process, so a run whose arrays add up to more
than :func:`output_limit` is an ``OutputTooLarge`` row of its own (:mod:`harness.execute.answers`).

Apart from the worker's handle and its process: the parent reads the limits, the child (spawned or forked
by a zygote) applies them, and neither needs the other's imports for that.
"""

from __future__ import annotations

import os

__all__ = ["MEMORY_ENV", "LIMIT_ENV", "OUTPUT_ENV", "parse_memory_limit", "output_limit", "default_memory_limit",
           "apply_memory_limit", "lift_memory_limit", "release_free_heap"]

#: Environment variable for the workers' default memory limit (bytes; 0 or "none": no limit).
MEMORY_ENV = "HARNESS_WORKER_MEMORY"
# How the parent tells a spawned child its limit (internal).
LIMIT_ENV = "HARNESS_WORKER_RLIMIT_AS"


#: The least address space a worker is given: what a worker process needs to import NumPy and Chainer and answer
#: (measured: 256 MiB starts one, 128 MiB does not). A smaller limit would kill every worker as it starts.
MIN_WORKER_MEMORY = 256 << 20


def parse_memory_limit(text: str, name: str = MEMORY_ENV) -> int | None:
    """Bytes from ``text`` (an int, ``0``/``none`` for no limit); a bad value is one InvalidArgument line, and so
    is a worker limit under :data:`MIN_WORKER_MEMORY` (no worker could start under it)."""
    from harness.core.errors import InvalidArgument

    t = text.strip().lower()
    if t in ("", "0", "none", "off"):
        return None
    try:
        value = int(t)
    except ValueError:
        raise InvalidArgument(f"{name}={text!r} must be a number of bytes, or 0/none for no limit") from None
    if value < 0:
        raise InvalidArgument(f"{name}={text!r} must be a number of bytes, or 0/none for no limit")
    if name == MEMORY_ENV and value < MIN_WORKER_MEMORY:
        raise InvalidArgument(f"{name}={text!r} is under the {MIN_WORKER_MEMORY:,} bytes a worker process needs to "
                              f"start (the interpreter, NumPy and Chainer): no worker could run; give more, or "
                              f"0/none for no limit")
    return value


#: Environment variable for the most bytes of arrays this process takes from one run (0 or "none": no limit).
OUTPUT_ENV = "HARNESS_MAX_OUTPUT_BYTES"


def output_limit() -> int | None:
    """``$HARNESS_MAX_OUTPUT_BYTES``, else an eighth of the RAM: the harness holds every repetition's outputs and
    measures them in its own process, so one run's outputs larger than that would end the harness, not the run."""
    if OUTPUT_ENV in os.environ:
        return parse_memory_limit(os.environ[OUTPUT_ENV], OUTPUT_ENV)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 8
    except (AttributeError, ValueError, OSError):
        return None


def default_memory_limit() -> int | None:
    """``$HARNESS_WORKER_MEMORY`` if set, else half the machine's RAM (None where that is unknown)."""
    if MEMORY_ENV in os.environ:
        return parse_memory_limit(os.environ[MEMORY_ENV])
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 2
    except (AttributeError, ValueError, OSError):
        return None


def apply_memory_limit(limit: int | None) -> None:
    """In the child, before anything big is allocated: the soft RLIMIT_AS the parent asked for."""
    if not limit:
        return
    try:
        import resource
    except ImportError:  # not POSIX: no limit, said in the module docstring
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        # The soft limit only, so that a GPU run can lift it again (see lift_memory_limit).
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


def lift_memory_limit() -> None:
    """Before a GPU run: CuPy/CUDA reserve huge virtual address space, so RLIMIT_AS must not apply."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        except (ValueError, OSError):
            pass



def release_free_heap() -> bool:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim(0)``); False where there is no
    glibc. A worker calls it between requests: the arrays of a run at a real size (a few MiB each, under
    glibc's mmap threshold once it has risen) are freed into the heap, and without this a pooled worker kept
    for the lane's next task holds gigabytes no memory budget counts (measured: 1.8 GiB after one bidirectional
    LSTM run of 400 steps at hidden 320, 66 MiB after the trim)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True
