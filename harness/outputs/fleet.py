"""``--cluster`` for the audit, report and gate verbs: where the tasks of a campaign run.

Without ``--cluster`` nothing changes (the local pool). With it, :func:`cluster_targets` connects
(:func:`harness.execute.cluster.connect`) and says where each campaign goes:

- ``--spread shard``: one campaign, its tasks spread over every worker (each task runs once somewhere);
  the environment recorded is the first worker's, with a warning when the workers' fingerprints differ.
- ``--spread every``: one campaign per worker, pinned to it, each with the fingerprint taken *on* that
  worker; an audit writes one file per worker (``A-worker0.json``, ``A-worker1.json``, ...), the columns
  that ``harness merge`` joins into the driver matrix and ``harness compare`` reads pairwise.

This module knows no verb: the command line declares ``--cluster``, ``--spread`` and ``--cluster-workers``
(a :class:`ClusterOptions`), and each verb passes its own callable to ``run_on_cluster(opts, run_one)`` (the
audit's is in :mod:`harness.outputs.audit.run`, the report's in :mod:`harness.outputs.report`), with
``run_one(target)`` passing ``target.executor`` to the campaign
and ``target.environment`` as the fingerprint; the gate, which judges one column, reads
:func:`cluster_targets` itself.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from harness.core import argcheck
from harness.core.errors import InvalidArgument
from harness.core.options import opt

__all__ = ["Target", "ClusterOptions", "cluster_targets", "run_on_cluster", "out_for"]

T = TypeVar("T")


@dataclass
class Target:
    """Where one campaign runs. ``executor`` None is the local pool; ``environment`` None means "take
    this process's fingerprint"; ``suffix`` tells the per-worker outputs of the every spread apart."""

    executor: Any = None
    environment: dict[str, Any] | None = None
    label: str | None = None
    suffix: str = ""
    cluster: dict[str, Any] = field(default_factory=dict)


#: How a campaign's tasks are spread over a cluster's workers.
SPREADS = ("shard", "every")
#: Worker processes of ``--cluster local`` where ``workers`` is not given.
LOCAL_WORKERS = 2


@dataclass(frozen=True)
class ClusterOptions:
    """Where a campaign's tasks run: ``address`` None is the local worker pool; else a Dask scheduler
    (``tcp://host:8786``), ``local`` (a LocalCluster of ``workers`` processes here) or ``local-cuda``."""

    address: str | None = opt(
        "--cluster", "run the tasks on a Dask cluster: tcp://host:8786, 'local' (a LocalCluster here) or "
        "'local-cuda' (one worker per GPU; needs dask-cuda). Default: the local worker pool", default=None,
        metavar="ADDRESS")
    spread: str = opt(
        "--spread", "shard: each task once somewhere (one column); every: every worker runs the whole corpus "
        "(one column per worker, each with its own fingerprint) (default {default})", default="shard",
        choices=SPREADS)
    workers: int | None = opt("--cluster-workers", "worker processes of --cluster local (default {default})",
                              default=None, check=argcheck.count(1), metavar="N", shown=LOCAL_WORKERS)

    def __post_init__(self) -> None:
        # The command line builds this record from what it was given, so a Python caller is refused the same way.
        if self.spread not in SPREADS:
            raise InvalidArgument(f"spread={self.spread!r} is not 'shard' or 'every'")
        if self.address is None:
            if self.workers is not None:
                raise InvalidArgument(f"cluster-workers={self.workers} needs --cluster local (without --cluster "
                                      f"the local worker pool runs the tasks)")
            if self.spread != "shard":
                raise InvalidArgument(f"spread={self.spread!r} needs --cluster (one campaign per cluster worker)")


def _fp_key(fp: dict[str, Any]) -> str:
    return json.dumps(fp, sort_keys=True, default=str)


@contextmanager
def cluster_targets(opts: ClusterOptions) -> Iterator[list[Target]]:
    """The targets of ``opts`` (one local target without a cluster); closes what it started."""
    spread = opts.spread  # (checked by the record)
    if opts.address is None:  # no Dask import without a cluster
        yield [Target()]
        return
    from harness.execute.cluster import DaskExecutor, connect, parse_cluster_spec, wait_for_workers, worker_fingerprints

    spec = parse_cluster_spec(opts.address)
    n = int(opts.workers or LOCAL_WORKERS)
    with connect(spec, n_workers=n) as conn:
        addrs = wait_for_workers(conn.client, n if spec == "local" else 1)
        fps = worker_fingerprints(conn.client)
        addrs = [a for a in addrs if a in fps]
        info = {"spec": spec, "spread": spread, "workers": addrs}
        if spread == "shard":
            if len({_fp_key(fps[a]) for a in addrs}) > 1:
                print("harness: warning: the cluster's workers have different environment fingerprints; a "
                      "shard column mixes them (use --spread every for one column per worker)", file=sys.stderr)
            yield [Target(DaskExecutor(conn.client), fps[addrs[0]], "cluster", "", info)]
        else:
            yield [Target(DaskExecutor(conn.client, workers=[a]), fps[a], f"worker{i}", f"-worker{i}",
                          {**info, "worker": a, "worker_index": i}) for i, a in enumerate(addrs)]


def run_on_cluster(opts: ClusterOptions, run_one: Callable[[Target], T]) -> list[T]:
    """``run_one(target)`` for every target of ``opts``: at once (one client thread each) on a cluster,
    in this thread without one. Results in target order."""
    with cluster_targets(opts) as targets:
        if len(targets) == 1:
            return [run_one(targets[0])]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            futs = [pool.submit(run_one, t) for t in targets]
            return [f.result() for f in futs]


def out_for(path: str | os.PathLike[str], target: Target) -> str:
    """``reports/A.json`` -> ``reports/A-worker1.json`` for the every spread (a directory gets the suffix)."""
    p = Path(os.fspath(path))
    if not target.suffix:
        return str(p)
    return str(p.with_name(p.stem + target.suffix + p.suffix)) if p.suffix else str(p) + target.suffix
