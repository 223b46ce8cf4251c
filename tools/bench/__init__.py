"""``python -m tools.bench`` (``make bench``): what the harness costs, as ratios of things measured side by side
in one run.

The machine is noisy, so no figure here is an absolute time: each is a *ratio* of two quantities measured
in the same run, interleaved where possible (absolute seconds appear only as context). One module per
section, one CSV row per measured ratio:

- :mod:`~tools.bench.overhead`: a report-like campaign's wall time / the subjects' own forward+backward,
  and where the rest goes (measured through ``Campaign.run(tasks, executor=...)``: :mod:`~tools.bench.driver`);
- :mod:`~tools.bench.scaling`: that campaign at 1x, 4x and 16x the default corpus: time per task, the
  overhead ratio, and whether cost is linear in tasks;
- :mod:`~tools.bench.comparator`: ``compare_repeats`` bytes/s against ``numpy.array_equal``;
- :mod:`~tools.bench.digest`: SHA-256, BLAKE3 and xxh3_128 against ``array_equal`` (the digest's pick);
- :mod:`~tools.bench.oracle`, :mod:`~tools.bench.determinism`, :mod:`~tools.bench.hook`: oracle cost, the
  price of ESPnet's deterministic embed_id, the localize hook;
- :mod:`~tools.bench.xdist`: the ci gate under pytest-xdist (nested pytest sessions: not in the smoke level);
- :mod:`~tools.bench.make_times`: ``make report`` / ``make test`` times where measured.

Files (``reports/bench/<run-id>/`` or ``--out DIR``), each written atomically: ``bench.csv``, ``bench.md``,
``bench.json`` and PNG plots. Levels: ``full`` (``make bench``), ``quick`` (``--quick``), ``smoke`` (tiny
inputs in process, a few seconds: ``suites/tools/test_bench.py``).
"""

from tools.bench.common import COLUMNS, NO_RATIO_STATUSES, Row
from tools.bench.runner import LEVELS, SECTIONS, TITLES, headlines, run_bench

__all__ = ["COLUMNS", "NO_RATIO_STATUSES", "Row", "LEVELS", "SECTIONS", "TITLES", "headlines", "run_bench"]
