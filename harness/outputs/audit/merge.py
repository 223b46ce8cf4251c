"""``python -m harness merge A.json B.json ... --out DIR``: many audit files as one matrix.

Subject/device/context rows x machine columns, each cell a short fingerprint of all that row's tensor digests
plus a consistency marker. Shards of one corpus run on one machine are joined into one column.
"""

from __future__ import annotations

import collections
import hashlib
import html
import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.core.errors import InvalidArgument
from harness.core.fileio import atomic_write
from harness.outputs.audit import pages
from harness.outputs.audit.fileformat import Audit, as_audit, failing, one_digest_algorithm

__all__ = ["MergeResult", "merge_audits", "write_merge"]


@dataclass
class MergeResult:
    """``matrix``: rows subject/device/context, one column per machine (cells ``<8 hex> <marker>``);
    ``long``: one row per (row, column) with the details; ``columns``: column -> files joined."""

    matrix: Any
    long: Any
    columns: dict[str, list[str]]
    warnings: list[str] = field(default_factory=list)

    LEGEND = ("Cells: first 8 hex of SHA-256 over the sorted `case:tensor:digest` lines of that row "
              "(failing entries count as `case:status:error type`). Marker `=`: the same as the most common "
              "cell of the row; `!`: differs from it; `~`: the repetitions disagreed within that audit. "
              "`skipped`: every entry was skipped there; `-`: no entry.")

    def to_markdown(self) -> str:
        lines = ["# Audit merge", "", self.LEGEND, ""]
        for col, files in self.columns.items():
            lines.append(f"- **{pages.md_text(col)}**: {', '.join(pages.md_text(f) for f in files)}")
        lines.append("")
        lines += [f"> **warning:** {pages.md_text(w)}" for w in self.warnings]
        if self.warnings:
            lines.append("")
        lines.append(pages.md_table(self.matrix))
        return "\n".join(lines) + "\n"


def _cell_digest(entries: Sequence[Mapping[str, Any]]) -> tuple[str, bool, bool]:
    """(first 8 hex, all skipped, some repetitions disagreed)."""
    lines = []
    live = [e for e in entries if e["status"] != "skipped"]
    for e in live:
        if e["status"] == "ok":
            lines += [f"{e['case_id']}:{n}:{t['digest']}" for n, t in e["tensors"].items()]
        else:
            lines.append(f"{e['case_id']}:status:{e['status']}:{(e.get('error') or '').split(' ', 1)[0]}")
    h = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:8]
    return h, not live, any(e.get("repeats_agreed") is False for e in live)


def _refuse_repeated(audits: Sequence[Audit]) -> None:
    """One audit given twice (the same file, or a copy with the same id and content) would be two machines."""
    seen: dict[Any, str] = {}
    for au in audits:
        keys = [("path", os.path.realpath(au.path))]
        keys.append(("content", hashlib.sha256(json.dumps(au.data, sort_keys=True).encode()).hexdigest()))
        for k in keys:
            if k in seen:
                raise InvalidArgument(f"audit file {au.path!r} is given twice to merge (the same "
                                      f"{'file' if k[0] == 'path' else 'content'} as {seen[k]!r})")
        for k in keys:
            seen[k] = au.path


def merge_audits(paths: Sequence[str | os.PathLike[str] | Audit]) -> MergeResult:
    """Many audits as one matrix. Audits with the same machine label that are shards ``i/n`` of
    the same corpus are unioned into one column; other same-label columns get the file stem."""
    import pandas as pd

    audits = [as_audit(p) for p in paths]
    if not audits:
        raise InvalidArgument("merge needs at least one audit file")
    one_digest_algorithm(audits)
    _refuse_repeated(audits)
    warnings: list[str] = []
    # Sources: a sharded audit joins the others of its (label, full corpus, n); the rest stand alone.
    sources: dict[Any, list[Audit]] = {}
    for i, au in enumerate(audits):
        sh = au.corpus.get("shard")
        if sh:
            n = sh.split("/")[1]
            key: tuple[Any, ...] = ("shards", au.label, au.corpus.get("full_digest"), n)
        else:
            key = ("whole", i)
        sources.setdefault(key, []).append(au)
    labels = collections.Counter(group[0].label for group in sources.values())
    columns: dict[str, list[Audit]] = {}
    for key, group in sources.items():
        label = group[0].label
        if labels[label] > 1:
            label = f"{label} ({'+'.join(au.stem for au in group)})"
        while label in columns:
            label += "'"
        columns[label] = group
        if key[0] == "shards":
            n = int(key[3])
            have = sorted(int(au.corpus["shard"].split("/")[0]) for au in group)
            if have != list(range(1, n + 1)):
                warnings.append(f"column {label!r} holds shards {have} of {n}: the corpus is not complete there")
    digests = {au.corpus.get("full_digest") or au.corpus.get("digest") for au in audits}
    if len(digests) > 1:
        warnings.append("the audits are of different corpora: cells of different columns cover different cases")

    merged: dict[str, dict[tuple, dict[str, Any]]] = {}
    for label, group in columns.items():
        by_key: dict[tuple, dict[str, Any]] = {}
        for au in group:
            for k, e in au.by_key().items():
                if k in by_key and by_key[k]["tensors"] != e["tensors"]:
                    warnings.append(f"column {label!r}: entry {k} appears in two shards with different digests")
                by_key.setdefault(k, e)
        merged[label] = by_key

    row_keys = sorted({k[1:] for by_key in merged.values() for k in by_key})
    long_rows = []
    for rk in row_keys:
        cells: dict[str, tuple[str, bool, bool, list[dict[str, Any]]] | None] = {}
        for label, by_key in merged.items():
            es = [e for k, e in sorted(by_key.items()) if k[1:] == rk]
            if not es:
                cells[label] = None
                continue
            h, skipped, disagreed = _cell_digest(es)
            cells[label] = (h, skipped, disagreed, es)
        live = [c[0] for c in cells.values() if c is not None and not c[1]]
        common = collections.Counter(live).most_common(1)[0][0] if live else None
        for label, c in cells.items():
            if c is None:
                text, marker = "-", ""
            elif c[1]:
                text, marker = "skipped", ""
            else:
                marker = "~" if c[2] else ("=" if c[0] == common else "!")
                text = f"{c[0]} {marker}"
            long_rows.append({
                "subject": rk[0], "device": rk[1], "context": rk[2], "column": label, "cell": text,
                "fingerprint": None if c is None or c[1] else c[0], "marker": marker,
                "entries": 0 if c is None else len(c[3]),
                "tensors": 0 if c is None else sum(len(e["tensors"]) for e in c[3]),
                "failing": 0 if c is None else sum(1 for e in c[3] if failing(e["status"])),
                "consistent": len(set(live)) <= 1,
            })
    long = pd.DataFrame(long_rows, columns=["subject", "device", "context", "column", "cell", "fingerprint",
                                            "marker", "entries", "tensors", "failing", "consistent"])
    if len(long):
        matrix = long.pivot(index=["subject", "device", "context"], columns="column", values="cell")
        matrix = matrix[list(columns)].reset_index()
        matrix.columns.name = None
        cons = long.groupby(["subject", "device", "context"], sort=False)["consistent"].first()
        matrix["consistent"] = [bool(cons[(s, d, c)]) for s, d, c in
                                zip(matrix["subject"], matrix["device"], matrix["context"])]
    else:
        matrix = pd.DataFrame(columns=["subject", "device", "context", *columns, "consistent"])
    return MergeResult(matrix, long, {k: [au.path for au in v] for k, v in columns.items()}, warnings)


def write_merge(res: MergeResult, out_dir: str) -> dict[str, str]:
    """merge.md, merge.csv, merge.html under ``out_dir``; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"merge.{k}") for k in ("md", "csv", "html")}
    atomic_write(paths["md"], res.to_markdown())
    atomic_write(paths["csv"], res.matrix.to_csv(index=False))

    def colour(v: Any) -> str:
        s = str(v)
        if s.endswith(" !") or s == "False":
            return "background-color: #f4a6a6"
        if s.endswith(" ~"):
            return "background-color: #f9d29d"
        if s.endswith(" =") or s == "True":
            return "background-color: #d9f2d9"
        return "color: #888"

    cols = [c for c in res.matrix.columns if c not in ("subject", "device", "context")]
    table = pages.escaped_style(res.matrix).map(colour, subset=cols).to_html() if len(res.matrix) else ""
    body = [f"<p>{html.escape(res.LEGEND)}</p>", "<ul>"]
    body += [f"<li><b>{html.escape(c)}</b>: {html.escape(', '.join(f))}</li>" for c, f in res.columns.items()]
    body.append("</ul>")
    body += [f"<p class='warn'>warning: {html.escape(w)}</p>" for w in res.warnings]
    body.append(table)
    atomic_write(paths["html"], pages.html_page("Audit merge", "\n".join(body)))
    return paths
