"""Attacks on what leaves the harness: an ``export`` asked to write a claim that is not true on its case (it
must refuse: exit 1, one line, nothing written), of a control or an oracle, of a kind no script can check here,
or onto a file it reads (refused in one line, exit 2). Each attack is named ``GROUP:NAME``."""

from __future__ import annotations

try:
    from tools.attacks_spec import CASE, Attack, write
except ImportError:  # run as a script: tools/ is the path's first folder
    from attacks_spec import CASE, Attack, write  # type: ignore[no-redef]

#: The groups of this module, in the order :func:`upstream_attacks` lists them.
GROUPS = ("export-false-claim", "export-cannot")

_EXPORT = ["export", "{tmp}/case.json", "--subject", "chainer.embed_id", "--out", "{tmp}/out.py"]


def upstream_attacks() -> list[Attack]:
    case = write("case.json", CASE)
    false = {  # claims that do not hold on a deterministic subject's small case
        "run-to-run": ["--kind", "not reproducible run to run"],
        "processes": ["--kind", "not reproducible across processes"],
        "tolerance": ["--kind", "beyond oracle tolerance"],
        "error-that-is-not-raised": ["--kind", "error", "--error", "ValueError in forward"],
        "no-kind-nothing-differs": [],
        "contexts-that-agree": ["--contexts", "default,debug", "--kind", "cross-context difference"],
        "relation-that-holds": ["--relation", "duplicate", "--kind", "not invariant"],
    }
    batch = write("case.json", CASE.replace('"ids_shape": [4]', '"ids_shape": [4, 2]'))
    out = [Attack(f"export-false-claim:{name}", [*_EXPORT, *extra], expect="refused",
                  setup=batch if name.startswith("relation") else case) for name, extra in false.items()]
    cannot = {  # refused before any work, in one line
        "control": ["--subject", "control.nondeterministic"],
        "oracle": ["--subject", "oracle.embed"],
        "harness-check": ["--kind", "gate check failed"],
        "cross-device-one-device": ["--kind", "cross-device difference"],
        "contention-context": ["--contexts", "default,contention", "--kind", "cross-context difference"],
        "note-on-a-defect": ["--kind", "not reproducible run to run", "--note"],
        "markdown-is-out": ["--markdown", "{tmp}/out.py"],
        "out-over-case": ["--out", "{tmp}/case.json"],
    }
    for name, extra in cannot.items():
        argv = list(_EXPORT)
        if "--subject" in extra:
            argv[argv.index("--subject") + 1] = extra[extra.index("--subject") + 1]
            at = extra.index("--subject")
            extra = extra[:at] + extra[at + 2:]
        if "--out" in extra:
            argv = argv[:-2]
        out.append(Attack(f"export-cannot:{name}", [*argv, *extra], setup=case))
    return out
