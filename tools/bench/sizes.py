"""Section ``sizes``: subject, oracle and harness seconds from the ``ci`` sizes up to realistic ones.

Per family, a ladder of cases from the ``ci`` profile's sizes up to the shapes of published recipes (LSTM hidden
320 and 1,024 over 100-120 steps; embeddings of vocabulary 5,000 and 65,000 as a decoder's and a word LM's batch;
an embedding into an LSTM at vocabulary 5,000, hidden 320). Each point runs the way ``replay`` runs it, in worker
processes: the subject once, its oracle (and, for an embedding, the declared-order reference) once, then the
measures; and it runs :data:`RUNS` times in a row, each figure the least of them (:func:`best_point`). Subject
seconds and oracle seconds are what the workers report for the runs themselves; input seconds are what they report
for building the case's arrays (drawing them from their seeds, or mapping a draw another worker shared: the runs'
``inputs`` timing); harness seconds are everything else (the arrays' transfer, digests, the run-to-run
comparison, the declared-order reference's run and the measures against the oracle). The harness row's note
splits them into those parts, and gives the floor of any judge outside the subject's process
(:func:`isolation_floor`: the subject's outputs moved once through shared memory, and the order reference's run),
saying where that floor lies above the row's target. Each point has three rows: oracle / subject; harness /
subject, whose target is the subject's seconds plus 0.1 s; and inputs / NumPy's own seconds drawing as many normals
in one thread (the draw's floor: no harness can hand a subject random inputs faster than they can be drawn), whose
target is that floor plus 0.1 s. All are figures measured in the same run, one point after the other. The
``quick`` and ``full`` levels add the points of the default corpus's corner cases
(:func:`harness.generate.recipes.corner_cases`: each recipe dimension at its maximum, the others small). One more
row prices a training trajectory: the harness's seconds per training step of a model subject
(:func:`trajectory_point`) against the step itself.
"""

from __future__ import annotations

import time
from typing import Any

from tools.bench.common import Row, figure, fmt_bytes, log, ratio, save_fig

__all__ = ["bench_sizes", "plot_sizes", "point_rows", "best_point", "RUNS", "CORNER", "LADDER", "draw_floor",
           "transfer_floor", "isolation_floor", "trajectory_point", "trajectory_row"]

#: Per family: (subject, [(label, spec), ...]) from the ci sizes up.
LADDER: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "lstm": ("chainer.NStepLSTM", [
        ("ci: hidden 8, 6 steps", {"n_layers": 1, "hidden": 8, "in_size": 4, "lengths": [6, 5, 3]}),
        ("dev: hidden 32, 16 steps", {"n_layers": 1, "hidden": 32, "in_size": 16, "lengths": [16, 12, 8]}),
        ("encoder: hidden 320, in 83, 120 steps", {"n_layers": 1, "hidden": 320, "in_size": 83,
                                                   "lengths": [120, 110, 100, 100]}),
        ("LM: hidden 1024, 100 steps", {"n_layers": 1, "hidden": 1024, "in_size": 1024, "lengths": [100, 100]}),
    ]),
    "embed": ("chainer.embed_id", [
        ("ci: vocab 20", {"vocab": 20, "width": 4, "ids_shape": [3, 5]}),
        ("dev: vocab 500", {"vocab": 500, "width": 32, "ids_shape": [8, 16]}),
        ("decoder: vocab 5000, 30 x 150 ids", {"vocab": 5000, "width": 320, "ids_shape": [30, 150]}),
        ("word LM: vocab 65000, 300 x 40 ids", {"vocab": 65000, "width": 1000, "ids_shape": [300, 40]}),
    ]),
    "pipeline": ("pipeline.embed_lstm", [
        ("ci: vocab 20", {"vocab": 20, "width": 4, "n_layers": 1, "hidden": 4, "lengths": [4, 3],
                          "ignore_label": -1}),
        ("dev: vocab 200, hidden 32", {"vocab": 200, "width": 32, "n_layers": 1, "hidden": 32, "lengths": [16, 12],
                                       "ignore_label": -1}),
        ("decoder: vocab 5000, hidden 320, 100 steps", {"vocab": 5000, "width": 320, "n_layers": 1,
                                                        "hidden": 320, "lengths": [100, 90, 80],
                                                        "ignore_label": -1}),
    ]),
}

#: How many points of each ladder a level runs (smoke: the ci point and the next, in a few seconds).
_POINTS = {"smoke": 2, "quick": 3, "full": 99}
#: Whether a level also runs the default corpus's corner cases (one per recipe dimension,
#: :func:`harness.generate.recipes.corner_cases`), one row each.
_CORNERS = {"smoke": False, "quick": True, "full": True}
#: The harness's seconds a point may spend beyond its subject's (the target of each harness row).
_SLACK = 0.1


#: How a corner case's point label begins (then its dimensions): the rows say it, the figure draws those apart.
CORNER = "corner "


def _corners() -> list[tuple[str, str, Any]]:
    """(family, label, case) of each corner case, on its family's ladder subject."""
    from harness.generate.recipes import corner_cases

    return [(c.family, CORNER + " + ".join(t.split(":", 1)[1] for t in c.tags if t.startswith("corner:")), c)
            for c in corner_cases()]


def _point(runner: Any, contracts: Any, subject: str, case: Any) -> dict[str, Any]:
    """One point: seconds of the subject's run, of its oracle's (and order reference's), of building their
    inputs, and of the rest."""
    from harness.core.devices import CPU
    from harness.judge.measure import measure_task
    from harness.subjects.registry import get_subject, order_reference

    t0 = time.perf_counter()
    main = runner.run(case, subject, CPU, "default")
    if not main.record.ok_runs:
        raise RuntimeError(f"{subject} on {case!r} did not run: {main.record.first_error or main.record.skip_reason}")
    subj = get_subject(subject)
    o = runner.run(case, subj.oracle, CPU, "default")
    oracle_seconds = o.seconds["subject"]
    inputs = main.seconds["inputs"] + o.seconds["inputs"]
    runs = [main, o]
    reference = 0.0
    order = None
    declared = order_reference(subject, "cpu")
    if declared is not None and get_subject(declared[0]).applies_to(case):  # a judge's reference: harness time
        r = runner.run(case, declared[0], CPU, "default")
        inputs += r.seconds["inputs"]
        reference = r.seconds["subject"]
        runs.append(r)
        order = (declared[0], r.arrays or None, declared[1])
    t_measures = time.perf_counter()
    measures = measure_task(main.record, case, contracts.find(subject, "cpu", "default"), role=subj.role,
                            arrays=main.arrays or None, oracle=(subj.oracle, o.arrays), order=order)
    wall = time.perf_counter() - t0
    # the harness's seconds by part (their sum is at most the harness's: the rest is bookkeeping between them)
    parts = {"answers": sum(max(x.seconds["transfer_and_overhead"] - x.seconds["inputs"], 0.0) for x in runs),
             "records": sum(x.seconds["compare"] for x in runs), "reference": reference,
             "measures": time.perf_counter() - t_measures}
    worst = max((m.error_ratio for m in measures if m.kind == "oracle" and m.error_ratio is not None),
                default=float("nan"))
    subject_seconds = main.seconds["subject"]
    elements, floor = draw_floor(case)
    # measured after the point's wall: not a part of its harness seconds
    outputs, transfer = transfer_floor(main.arrays)
    return {"subject": subject_seconds, "oracle": oracle_seconds, "inputs": inputs,
            "harness": max(wall - subject_seconds - oracle_seconds - inputs, 0.0), "wall": wall, "worst": worst,
            "elements": elements, "floor": floor, "parts": parts,
            "isolation": {"outputs": outputs, "transfer": transfer, "reference": reference}}


#: How many times in a row each point runs: a seconds figure is its least over them. A subject's first run at a
#: size can stall on fresh memory (the word LM's took 0.15 s warm, 0.5-1.5 s after another size), and one such
#: sample would loosen the harness row's target by its stall: a row met by accident.
RUNS = 3


def best_point(runner: Any, contracts: Any, subject: str, case: Any, runs: int = RUNS) -> dict[str, Any]:
    """:func:`_point` ``runs`` times in a row, as one point: the subject's, the oracle's and the harness's seconds
    each the least of the runs (the harness's parts those of its least run), the floor of an isolated judge the
    least of its parts; the inputs are the first run's, which drew them (later runs map what it shared)."""
    ms = [_point(runner, contracts, subject, case) for _ in range(runs)]
    best = min(ms, key=lambda m: m["harness"])
    iso = {k: min(m["isolation"][k] for m in ms) for k in ("transfer", "reference")}
    return {**best, "subject": min(m["subject"] for m in ms), "oracle": min(m["oracle"] for m in ms),
            "inputs": ms[0]["inputs"], "elements": ms[0]["elements"], "floor": ms[0]["floor"], "runs": runs,
            "isolation": {**best["isolation"], **iso}}


def draw_floor(case: Any) -> tuple[int, float]:
    """How many elements the case's float arrays hold, and NumPy's seconds drawing as many standard normals
    (PCG64, one thread, a chunk at a time into one buffer): the least any draw of those inputs costs."""
    import numpy as np

    from harness.core.case_arrays import array_layout

    n = sum(int(np.prod(shape, dtype=np.int64)) for shape, dt in array_layout(case.family, case.spec).values()
            if np.dtype(dt).kind == "f")
    rng = np.random.default_rng(0)
    buf = np.empty(max(1, min(n, 1 << 20)))
    t0 = time.perf_counter()
    for start in range(0, n, buf.size):
        rng.standard_normal(out=buf[:min(buf.size, n - start)])
    return n, time.perf_counter() - t0


def transfer_floor(arrays: Any, folder: str | None = None) -> tuple[int, float]:
    """How many bytes the subject's output ``arrays`` hold, and the seconds of the least any judge outside the
    subject's process pays to see them: written once into a file in shared memory (where a worker's spool is),
    mapped, read once (:func:`harness.judge.digest.digest_all`, the harness's cheapest full read) and freed. A
    judge in another process does this much at least, whatever it then computes. ``folder``: where the file
    goes (by default ``/dev/shm`` where it is writable, else the temp folder)."""
    import mmap
    import os
    import tempfile

    import numpy as np

    from harness.judge.digest import digest_all

    arrs = [np.ascontiguousarray(a) for a in arrays.values() if a.nbytes]
    nbytes = sum(a.nbytes for a in arrs)
    if not arrs:
        return 0, 0.0
    if folder is None and os.access("/dev/shm", os.W_OK):
        folder = "/dev/shm"
    fd, path = tempfile.mkstemp(prefix="harness-bench-transfer-", dir=folder)
    try:
        t0 = time.perf_counter()
        with os.fdopen(fd, "wb") as f:
            for a in arrs:
                f.write(a.reshape(-1).view(np.uint8).data)
        with open(path, "rb") as f:
            pages = mmap.mmap(f.fileno(), nbytes, access=mmap.ACCESS_READ)
        os.unlink(path)
        offsets = np.cumsum([0] + [a.nbytes for a in arrs])
        digest_all([np.ndarray(a.shape, a.dtype, pages, int(o)) for a, o in zip(arrs, offsets)])
        pages.close()
        return nbytes, time.perf_counter() - t0
    finally:
        if os.path.exists(path):
            os.unlink(path)


def trajectory_point(runner: Any, case: Any, subject: str = "model.espnet_rnnlm") -> dict[str, float]:
    """One training run of ``case`` in a worker, as a campaign runs it, and its step-by-step comparison with
    itself (what a trajectory's judge does with two runs): the steps' own seconds (what the worker reports
    for the subject: every step's forward, loss, backward, clipping and update) and the harness's (the rest of
    the run's wall: drawing the batches and the start, digests, snapshots, transfer; and the comparison)."""
    from harness.core.devices import CPU
    from harness.judge.trajectory import compare_runs, read_run

    t0 = time.perf_counter()
    out = runner.run(case, subject, CPU, "default")
    if not out.record.ok_runs:
        raise RuntimeError(f"{subject} on {case!r} did not run: {out.record.first_error or out.record.skip_reason}")
    run = read_run(out.arrays)
    if not compare_runs(run, run).identical:
        raise RuntimeError("a run compared with itself differs: the trajectory judge is broken")
    wall = time.perf_counter() - t0
    steps = float(case.spec["steps"])
    step = out.seconds["subject"] / steps
    return {"steps": steps, "step": step, "harness": max(wall / steps - step, 0.0), "wall": wall}


def trajectory_row(runner: Any, level: str) -> tuple[Row, dict[str, float]]:
    """The harness's seconds per training step against the step's own: the ESPnet RNN LM of the default
    corpus's trajectory cases (``smoke``: its 3 steps) or of the ``realistic`` slice (10 of its steps)."""
    from harness.generate.model_cases import model_case, trajectory_cases

    if level == "smoke":
        [case] = [c for c in trajectory_cases("ci") if c.spec["recipe"] == "espnet_rnnlm"]
    else:
        case = model_case("espnet_rnnlm", "slice", seed=7, steps=10)
    m = trajectory_point(runner, case)
    row = Row("sizes", "model: harness per training step", ratio(m["harness"], m["step"]),
              "harness seconds per step / one training step's seconds",
              "harness seconds per step (the batches and start drawn in the worker, digests, parameter snapshots, "
              "transfer, the step-by-step comparison)", m["harness"],
              "one step of model.espnet_rnnlm (forward, loss, backward, clipping, update)", m["step"], "s", 1,
              note=f"case {case.id} ({int(m['steps'])} steps, hidden {case.spec['hidden']}, batch "
                   f"{case.spec['batch']}); one run in a worker process, after a warm-up run")
    return row, m


#: What each of a point's harness parts (:func:`_point`) holds, for the harness row's note.
_PARTS = {"answers": "the runs' answers (digests in the workers, transfer)",
          "records": "their records (run-to-run comparison, sketches)",
          "reference": "the order reference's run", "measures": "the measures"}


def _parts_text(m: dict[str, Any]) -> str:
    """``"; harness seconds by part: <part> <s> s, ..."`` for the harness row's note, or nothing where the point
    has no parts."""
    parts = m.get("parts") or {}
    shown = [f"{_PARTS[k]} {parts[k]:.2f} s" for k in _PARTS if parts.get(k)]
    return f"; harness seconds by part: {', '.join(shown)}" if shown else ""


def isolation_floor(m: dict[str, Any]) -> float | None:
    """The least seconds this harness's judge can spend at a point (:func:`_point`) from another process: the
    subject's outputs copied out once (:func:`transfer_floor`) and, where the subject declares an order, the run
    of the order reference it compares them with; None for a point measured without it. (A judge handed the
    subject's own pages, with no copy, would need the subject's arrays allocated in shared memory: an allocator
    hook in the worker's NumPy, which this floor does not assume.)"""
    iso = m.get("isolation")
    return None if not iso else iso["transfer"] + iso["reference"]


def _isolation_text(m: dict[str, Any]) -> str:
    """``"; the least a judge in another process pays here: ..."`` for the harness row's note, saying where that
    floor lies above the row's target; nothing for a point without it."""
    least = isolation_floor(m)
    if least is None:
        return ""
    iso = m["isolation"]
    ref = iso["reference"]
    text = (f"; the least a judge in another process pays here: {least:.2f} s (the subject's "
            f"{fmt_bytes(iso['outputs'])} of outputs written once to shared memory and read once "
            f"{iso['transfer']:.2f} s" + (f", the order reference's run {ref:.2f} s" if ref else "") + ")")
    if least > m["subject"] + _SLACK:
        text += ("; that floor is above the target: a judge that copies the outputs out of the subject's process "
                 "once" + (" and runs this order reference" if ref else "") + " cannot meet it at these subject "
                 "seconds")
    return text


def point_rows(family: str, label: str, subject: str, case: Any, peak: float, m: dict[str, Any]) -> list[Row]:
    """A point's three rows (oracle, harness, inputs) from its measurements ``m`` (:func:`_point`), each harness
    and inputs row ``met`` or ``missed`` by its target."""
    from harness.subjects.registry import get_subject

    rows: list[Row] = []
    runs = m.get("runs", 1)
    note = (f"case {case.id}; " + (f"the least of {runs} runs in a row" if runs > 1 else "one run") +
            " each in worker processes; estimated peak "
            f"{peak / 2 ** 30:.2f} GiB; worst oracle error/allowed {m['worst']:.3g}")
    oracle = get_subject(subject).oracle
    rows.append(Row("sizes", f"{family}: {label}: oracle", ratio(m["oracle"], m["subject"]),
                    f"{oracle} / {subject} seconds", f"{oracle} seconds",
                    m["oracle"], f"{subject} seconds", m["subject"], "s", 1, target="<= 1 at the "
                    "largest size", note=note))
    within = m["harness"] <= m["subject"] + _SLACK
    rows.append(Row("sizes", f"{family}: {label}: harness", ratio(m["harness"], m["subject"]),
                    f"harness / {subject} seconds",
                    "harness seconds (transfer, digests, comparisons, measures; not the inputs)",
                    m["harness"], f"{subject} seconds", m["subject"], "s", 1,
                    target=f"harness <= subject + {_SLACK} s", status="met" if within else "missed",
                    note=f"{note}; with the inputs {m['harness'] + m['inputs']:.3g} s{_parts_text(m)}"
                         f"{_isolation_text(m)}"))
    drawn = m["inputs"] <= m["floor"] + _SLACK
    rows.append(Row("sizes", f"{family}: {label}: inputs", ratio(m["inputs"], m["floor"]),
                    "inputs / NumPy's draw of as many normals",
                    "seconds building the case's arrays in the workers (in the point's first run, which drew "
                    "them: its subject's, oracle's and order reference's runs)",
                    m["inputs"], f"NumPy drawing {m['elements']:,} standard normals in one thread",
                    m["floor"], "s", 1, target=f"inputs <= NumPy's draw + {_SLACK} s",
                    status="met" if drawn else "missed",
                    note=f"case {case.id}; the float arrays' elements, drawn once per harness process "
                         "and shared by its workers above 1 MiB"))
    return rows


def bench_sizes(level: str = "full", quiet: bool = False) -> tuple[list[Row], dict[str, Any]]:
    """Oracle / subject and harness / subject seconds along each family's ladder of sizes."""
    from harness.core.cases import Case
    from harness.core.cost import estimate
    from harness.execute.isolated import Runner
    from harness.judge.contracts import load_contracts

    contracts = load_contracts()
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    with Runner() as runner:  # the run timeout follows each case's estimated work
        # the workers' start-up and first calls are not a point's cost: one small run of each subject first (another
        # seed: a worker keeps the arrays of the cases it built)
        for family, (subject, ladder) in LADDER.items():
            _point(runner, contracts, subject, Case(family, 4, ladder[1][1]))
        points = [(family, label, Case(family, 3, spec)) for family, (_, ladder) in LADDER.items()
                  for label, spec in ladder[:_POINTS[level]]]
        for family, label, case in points + (_corners() if _CORNERS[level] else []):
            subject = LADDER[family][0]
            raw.setdefault(family, [])
            cost = estimate(case, subject=subject)
            m = best_point(runner, contracts, subject, case)
            raw[family].append({"label": label, "flops": cost.flops, "peak": cost.peak, **m})
            rows += point_rows(family, label, subject, case, cost.peak, m)
            log(f"sizes {family} {label}: subject {m['subject']:.2f} s, oracle {m['oracle']:.2f} s, "
                f"inputs {m['inputs']:.2f} s (NumPy's draw {m['floor']:.2f} s), harness {m['harness']:.2f} s",
                quiet)
        from harness.generate.model_cases import model_case

        trajectory_point(runner, model_case("espnet_rnnlm", "ci", seed=4, steps=1))  # the model's warm-up
        row, tm = trajectory_row(runner, level)
        rows.append(row)
        log(f"sizes model: {tm['step']:.3f} s a training step, harness {tm['harness']:.3f} s a step", quiet)
    return rows, {**raw, "trajectory": tm}


def plot_sizes(raw: dict[str, Any], path: str) -> str:
    """Oracle / subject and harness / subject against the case's work: per family, its ladder of sizes as a line
    (in order of work) and its corner cases as unjoined open markers (each is one dimension at its maximum, the
    others small: not a step of the ladder)."""
    fig = figure(9, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    for family, points in raw.items():
        if family == "trajectory":  # one training run's point, not a ladder (its row says it)
            continue
        ladder = sorted((p for p in points if not p["label"].startswith(CORNER)), key=lambda p: p["flops"])
        corners = [p for p in points if p["label"].startswith(CORNER)]
        line = ax.plot([p["flops"] for p in ladder], [ratio(p["oracle"], p["subject"]) for p in ladder], "-o",
                       label=f"{family}: oracle")
        color = line[0].get_color()
        ax.plot([p["flops"] for p in ladder], [ratio(p["harness"], p["subject"]) for p in ladder], "--s",
                color=color, label=f"{family}: harness (not the inputs)")
        for key, marker in (("oracle", "o"), ("harness", "s")):
            ax.plot([p["flops"] for p in corners], [ratio(p[key], p["subject"]) for p in corners], marker,
                    mfc="none", color=color, ls="none")
        for p in ladder:
            ax.annotate(p["label"].split(":")[0], (p["flops"], ratio(p["oracle"], p["subject"])), fontsize=7)
    ax.plot([], [], "o", mfc="none", color="grey", ls="none", label="corner cases (open markers)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("the subject's estimated work (flops, harness.core.cost)")
    ax.set_ylabel("seconds / subject seconds")
    ax.legend(fontsize=7)
    fig.suptitle("Oracle and harness cost against the subject, from ci sizes to realistic ones")
    return save_fig(fig, path)
