"""Driver audits: digest every subject on a fixed corpus into one file per machine, then say what changed.

Users run the same corpus on two GPU drivers (or CUDA/CuPy versions, BLAS builds, machines) and
want to know at a glance which implementations changed bits, by how much, and which environment
difference goes with it. One module per part:

- :mod:`~harness.outputs.audit.fileformat`: the audit file, its validation (:func:`load_audit`) and :class:`Audit`;
- :mod:`~harness.outputs.audit.run`: ``python -m harness audit --out A.json`` (:func:`run_audit`);
- :mod:`~harness.outputs.audit.compare`: ``python -m harness compare A.json B.json`` (:func:`compare_audits`);
- :mod:`~harness.outputs.audit.merge`: ``python -m harness merge A.json B.json ... --out DIR`` (:func:`merge_audits`);
- :mod:`~harness.outputs.audit.pages`: how compare and merge write Markdown and HTML.

The environment diff and the machine label live beside the fingerprint, in :mod:`harness.core.env`.
"""

from harness.core.env import environment_diff, machine_label
from harness.core.env import flatten_fingerprint as flatten
from harness.outputs.audit.compare import (
                                           CHANGE_VERDICTS,
                                           AuditComparison,
                                           compare_audits,
                                           compare_changed,
                                           subject_role,
                                           write_compare,
)
from harness.outputs.audit.fileformat import (
                                           DEFAULT_CORPUS,
                                           DIGEST_ALGORITHMS,
                                           FORMAT,
                                           STATUSES,
                                           VERSION,
                                           Audit,
                                           digest_algorithm,
                                           load_audit,
)
from harness.outputs.audit.merge import MergeResult, merge_audits, write_merge
from harness.outputs.audit.run import run_audit

__all__ = [
    "DEFAULT_CORPUS", "FORMAT", "VERSION", "CHANGE_VERDICTS", "Audit", "AuditComparison", "MergeResult",
    "run_audit", "load_audit", "compare_audits", "merge_audits", "machine_label", "environment_diff",
    "flatten", "compare_changed", "STATUSES", "digest_algorithm",
    "DIGEST_ALGORITHMS", "write_compare", "write_merge", "subject_role",
]
