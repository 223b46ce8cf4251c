"""Section ``oracle``: the float64 oracle's time against its subject's, per family, over small sweeps of
batch, sequence length and width."""

from __future__ import annotations

from typing import Any

from tools.bench.common import Row, figure, log, median, ratio, save_fig, slope

__all__ = ["bench_oracle", "plot_oracle"]

_ORACLE_FAMILIES = {"embed": "chainer.embed_id", "lstm": "chainer.NStepLSTM", "pipeline": "pipeline.embed_lstm"}
_ORACLE_OF = {"embed": "oracle.embed", "lstm": "oracle.lstm", "pipeline": "oracle.pipeline"}


def _oracle_points(level: str) -> dict[str, dict[str, Any]]:
    """Per family: the base point and 3 values for each of batch, length and width (base in the middle);
    ``smoke``: the quick base point and one more value per parameter."""
    if level == "smoke":
        return {fam: {"base": spec["base"], "sweep": {k: v[1:] for k, v in spec["sweep"].items()}}
                for fam, spec in _oracle_points("quick").items()}
    if level == "quick":
        return {
            "embed": {"base": {"batch": 4, "length": 8, "width": 8}, "sweep": {
                "batch": [2, 4, 8], "length": [4, 8, 16], "width": [4, 8, 16]}},
            "lstm": {"base": {"batch": 2, "length": 4, "width": 8}, "sweep": {
                "batch": [1, 2, 4], "length": [2, 4, 8], "width": [4, 8, 16]}},
            "pipeline": {"base": {"batch": 2, "length": 4, "width": 8}, "sweep": {
                "batch": [1, 2, 4], "length": [2, 4, 8], "width": [4, 8, 16]}},
        }
    return {
        "embed": {"base": {"batch": 16, "length": 32, "width": 32}, "sweep": {
            "batch": [4, 16, 64], "length": [8, 32, 128], "width": [8, 32, 128]}},
        "lstm": {"base": {"batch": 8, "length": 16, "width": 32}, "sweep": {
            "batch": [2, 8, 32], "length": [4, 16, 64], "width": [8, 32, 128]}},
        "pipeline": {"base": {"batch": 8, "length": 16, "width": 32}, "sweep": {
            "batch": [2, 8, 32], "length": [4, 16, 64], "width": [8, 32, 128]}},
    }


def _oracle_case(family: str, batch: int, length: int, width: int) -> Any:
    from harness.core.cases import Case

    if family == "embed":
        # ids drawn uniformly from a vocabulary of 100: most rows collect several terms
        return Case("embed", 7, {"vocab": 100, "width": width, "ids_shape": [batch, length]})
    if family == "lstm":
        return Case("lstm", 7, {"n_layers": 1, "in_size": width, "hidden": width, "lengths": [length] * batch})
    return Case("pipeline", 7, {"vocab": 100, "width": width, "hidden": width, "n_layers": 1,
                                "lengths": [length] * batch, "ignore_label": -1})


def _subject_seconds(subject_name: str, case: Any) -> float:
    from harness.core.contexts import get_context
    from harness.core.devices import parse_device
    from harness.subjects.base import execute
    from harness.subjects.registry import get_subject

    res = execute(get_subject(subject_name), case, parse_device("cpu"), get_context("default"))
    if not res.ok:
        raise RuntimeError(f"{subject_name} on {case!r} did not run: {res.error or res.skip_reason}")
    return res.subject_seconds


def bench_oracle(level: str = "full", rounds: int | None = None, quiet: bool = False
                 ) -> tuple[list[Row], dict[str, Any]]:
    """Oracle seconds / subject seconds, in process, interleaved per round, over small sweeps."""
    rounds = rounds or (1 if level == "smoke" else 2 if level == "quick" else 3)
    plan = _oracle_points(level)
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    for family, spec in plan.items():
        subj, orc = _ORACLE_FAMILIES[family], _ORACLE_OF[family]
        points: dict[tuple[int, int, int], dict[str, float]] = {}

        def measure(batch: int, length: int, width: int) -> dict[str, float]:
            key = (batch, length, width)
            if key not in points:
                case = _oracle_case(family, batch, length, width)
                ts: list[float] = []
                to: list[float] = []
                for r in range(rounds):
                    pair = [(subj, ts), (orc, to)] if r % 2 == 0 else [(orc, to), (subj, ts)]
                    for name, acc in pair:
                        acc.append(_subject_seconds(name, case))
                points[key] = {"subject": median(ts), "oracle": median(to),
                               "ratio": median(ratio(o, s) for o, s in zip(to, ts))}
            return points[key]

        base = spec["base"]
        _subject_seconds(subj, _oracle_case(family, **base))  # warm-up: imports, first-call caches
        _subject_seconds(orc, _oracle_case(family, **base))
        b = measure(**base)
        rows.append(Row("oracle", f"{family}: base (batch {base['batch']}, length {base['length']}, "
                                   f"width {base['width']})", b["ratio"], f"{orc} / {subj} seconds",
                         f"{orc} seconds", b["oracle"], f"{subj} forward+backward seconds", b["subject"], "s",
                         rounds, note="in process, CPU, context default; subject time includes double backward "
                                      "where the subject runs one" if family == "embed" else
                         "in process, CPU, context default"))
        raw[family] = {"base": base, "sweep": {}}
        for param, values in spec["sweep"].items():
            series = []
            for v in values:
                p = dict(base)
                p[param] = v
                m = measure(**p)
                series.append((v, m))
            xo = slope([v for v, _ in series], [m["oracle"] for _, m in series])
            xs = slope([v for v, _ in series], [m["subject"] for _, m in series])
            for v, m in series:
                rows.append(Row("oracle", f"{family}: {param}={v}", m["ratio"], f"{orc} / {subj} seconds",
                                 f"{orc} seconds", m["oracle"], f"{subj} seconds", m["subject"], "s", rounds,
                                 note=f"sweep of {param} (others at base): oracle ~ {param}^{xo:.2f}, "
                                      f"subject ~ {param}^{xs:.2f}"))
            raw[family]["sweep"][param] = [{"value": v, **m} for v, m in series]
            raw[family]["sweep"][param + "_exponents"] = {"oracle": xo, "subject": xs}
        log(f"oracle {family} done", quiet)
    return rows, raw


def plot_oracle(raw: dict[str, Any], path: str) -> str:
    """The ratio against each swept parameter, one panel per parameter."""
    params = ("batch", "length", "width")
    fig = figure(12, 3.8)
    for i, param in enumerate(params):
        ax = fig.add_subplot(1, 3, i + 1)
        for family, data in raw.items():
            series = data["sweep"].get(param, [])
            if series:
                ax.plot([s["value"] for s in series], [s["ratio"] for s in series], "-o",
                        label=f"{family} ({_ORACLE_OF[family]} / {_ORACLE_FAMILIES[family]})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel(param)
        if i == 0:
            ax.set_ylabel("oracle seconds / subject seconds")
    fig.legend(*fig.axes[0].get_legend_handles_labels(), loc="upper center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle("Oracle cost against its subject")
    return save_fig(fig, path)
