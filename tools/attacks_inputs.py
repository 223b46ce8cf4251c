"""Attacks on a verb's inputs, checked before any work: a case's arrays and cross-field rules, LSTM cases that
contradict themselves, an error in every run (exit 3, never "differs"), audit files and their kept arrays, and
contracts files that contradict themselves. Each must be refused in one line (or, where so marked, handled)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

try:
    from tools.attacks_spec import CASE, ROOT, Attack, both, write
except ImportError:  # run as a script: tools/ is the path's first folder
    from attacks_spec import CASE, ROOT, Attack, both, write  # type: ignore[no-redef]


def _case(**over: object) -> str:
    d = json.loads(CASE)
    for k, v in over.items():
        if k in ("spec_extra",):
            d["spec"].update(v)  # type: ignore[arg-type]
        else:
            d[k] = v
    return json.dumps(d)


_LSTM_CASE = {"family": "lstm", "seed": 0, "spec": {"in_size": 3, "hidden": 2, "n_layers": 1, "lengths": [2, 1]}}


def _audit_text(mutate: Callable[[dict], None] | None = None, *, subject: str = "chainer.embed_id",
                arrays: bool = False) -> str:
    import numpy as np

    from harness.judge.comparator import DIGEST_ALGORITHM, digest

    y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    e = {"case_id": "c0", "family": "embed", "subject": subject, "role": "subject", "device": "cpu",
         "context": "default", "bad_input": False, "status": "ok", "error": None, "skip_reason": None,
         "repeats_agreed": True, "array_file": "0.npz" if arrays else None,
         "tensors": {"y": {"digest": digest(y), "dtype": "float32", "shape": [2, 3], "repeats_agreed": True}}}
    d = {"format": "harness-audit", "version": 1, "digest": DIGEST_ALGORITHM, "created": "2026-01-01T00:00:00+00:00",
         "environment": {"gpu": {"available": False}}, "corpus": {"digest": "d", "cases": 1},
         "settings": {"repeats": 2}, "arrays_dir": "arrays" if arrays else None, "entries": [e]}
    if mutate is not None:
        mutate(d)
    return json.dumps(d)


def damage_npz(kind: str, p: Path) -> None:
    """Write a damaged array file at ``p``, one of :data:`NPZ_DAMAGE`: a zip that is not one, an object array
    that only unpickling would read, a bare ``.npy``, or arrays of another shape than an audit entry's (2, 3)."""
    import numpy as np

    if kind == "corrupt":
        p.write_bytes(b"PK\x03\x04" + bytes(30))
    elif kind == "pickled":
        np.savez(p, y=np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif kind == "npy":
        with open(p, "wb") as f:
            np.save(f, np.zeros((2, 3), np.float32))
    elif kind == "shape":
        np.savez(p, y=np.zeros((3, 2), np.float32))
    else:
        raise ValueError(f"kind={kind!r} is not one of {', '.join(NPZ_DAMAGE)}")


#: The kinds of :func:`damage_npz`, with what each is.
NPZ_DAMAGE = {"corrupt": "a corrupt zip", "pickled": "a pickled object array", "npy": "a bare .npy",
              "shape": "arrays of another shape"}


def _npz(kind: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / "arrays").mkdir(exist_ok=True)
        damage_npz(kind, tmp / "arrays" / "0.npz")
        (tmp / "a.json").write_text(_audit_text(arrays=True))
        (tmp / "b.json").write_text(_audit_text(arrays=True))
    return setup


def _entry(key: str, value: object) -> Callable[[dict], None]:
    return lambda d: d["entries"][0].__setitem__(key, value)


def _tensor(key: str, value: object) -> Callable[[dict], None]:
    return lambda d: d["entries"][0]["tensors"]["y"].__setitem__(key, value)


def input_check_attacks() -> list[Attack]:
    """The four input categories: a case's arrays and cross-field rules, an error that is not a difference, audit
    files and their arrays, contracts that contradict themselves."""
    out: list[Attack] = []
    gy = {"dtype": "float32", "shape": [4, 3]}
    bad_arrays = {
        "bits-not-base64": _case(arrays={"gy": {**gy, "bits": "@@@@"}}),
        "bits-short": _case(arrays={"gy": {**gy, "bits": "AAAA"}}),
        "bits-long": _case(arrays={"gy": {**gy, "bits": "A" * 68}}),
        "dtype-object": _case(arrays={"gy": {"dtype": "object", "shape": [1], "data": [1]}}),
        "dtype-void": _case(arrays={"gy": {"dtype": "V4", "shape": [1], "bits": "AAAAAA=="}}),
        "dtype-str": _case(arrays={"gy": {"dtype": "<U3", "shape": [1], "data": ["abc"]}}),
        "data-strings": _case(arrays={"x": {"dtype": "int32", "shape": [4], "data": ["a", "b", "c", "d"]}}),
        "data-overflow": _case(arrays={"x": {"dtype": "int8", "shape": [4], "data": [1, 2, 3, 999]}}),
        "data-count": _case(arrays={"x": {"dtype": "int32", "shape": [4], "data": [1]}}),
        "shape-contradicts": _case(arrays={"x": {"dtype": "int32", "shape": [5], "data": [0, 1, 2, 3, 4]}}),
        "array-names-nothing": _case(arrays={"zz": {"dtype": "int32", "shape": [1], "data": [0]}}),
        "inject-names-nothing": _case(spec_extra={"inject": [{"array": "nope", "index": 0, "value": 1}]},
                                      expect={"kind": "documented"}),
        "inject-nan-into-ids": _case(spec_extra={"inject": [{"array": "x", "index": 0, "value": "nan"}]},
                                     expect={"kind": "documented"}),
        "version-1.0": _case(version=1.0),
        "version-str": _case(version="1.0"),
    }
    for name, text in bad_arrays.items():
        for verb in ("replay", "localize", "shrink"):
            extra = ["--kind", "error", "--max-runs", "2"] if verb == "shrink" else []
            out.append(Attack(f"case-arrays:{name}:{verb}", [verb, "{tmp}/case.json", "--subject", "chainer.embed_id",
                                                             *extra], setup=write("case.json", text)))
        out.append(Attack(f"corpus-arrays:{name}", ["report", "--corpus", "{tmp}/c.jsonl", "--out", "{tmp}/run",
                                                    "--devices", "cpu", "--quiet"],
                          setup=write("c.jsonl", CASE + "\n" + text + "\n")))
    lstm = {
        "xs-widths-short": {**_LSTM_CASE, "spec": {**_LSTM_CASE["spec"], "xs_widths": [3]}},
        "xs-widths-valid-case": {**_LSTM_CASE, "spec": {**_LSTM_CASE["spec"], "xs_widths": [3, 5]}},
        "bidirectional-on-uni": {**_LSTM_CASE, "spec": {**_LSTM_CASE["spec"], "bidirectional": True}},
    }
    for name, d in lstm.items():
        for verb in ("replay", "localize", "shrink"):
            extra = ["--kind", "error", "--max-runs", "2"] if verb == "shrink" else []
            out.append(Attack(f"case-lstm:{name}:{verb}", [verb, "{tmp}/case.json", "--subject", "chainer.NStepLSTM",
                                                           *extra], setup=write("case.json", json.dumps(d))))
    # An error in every run is exit 3, never "differs" (exit 1).
    out.append(Attack("replay-raises:every-run", ["replay", "{tmp}/case.json", "--subject", "espnet.embed_id"],
                      expect="raised", setup=write("case.json", json.dumps({
                          "family": "embed", "seed": 0, "spec": {"vocab": 5, "width": 3, "ids_shape": [4],
                                                                 "w_dtype": "float16"},
                          "expect": {"kind": "raises", "errors": ["InvalidType"]}, "tags": ["bad:w_dtype_espnet"]}))))
    bad_audits: dict[str, Callable[[dict], None]] = {
        "version-str-1.0": lambda d: d.__setitem__("version", "1.0"),
        "version-float": lambda d: d.__setitem__("version", 1.0),
        "unknown-top-field": lambda d: d.__setitem__("colour", 1),
        "unknown-entry-field": _entry("colour", 1), "unknown-tensor-field": _tensor("colour", 1),
        "empty-digest": _tensor("digest", ""), "digest-other-algorithm": _tensor("digest", "sha256:" + "ab" * 32),
        "digest-garbage": _tensor("digest", "xxh3_128:zz"), "dtype-nothing": _tensor("dtype", "float8"),
        "dtype-object": _tensor("dtype", "object"), "device-nothing": _entry("device", "tpu"),
        "family-nothing": _entry("family", "conv"), "array-file-path": _entry("array_file", "../../etc/passwd"),
        "settings-unknown": lambda d: d["settings"].__setitem__("colour", 1),
    }
    for name, mutate in bad_audits.items():
        for verb in (["compare", "{tmp}/a.json", "{tmp}/b.json"], ["merge", "{tmp}/a.json", "{tmp}/b.json", "--out",
                                                                   "{tmp}/m"]):
            out.append(Attack(f"audit-field:{name}:{verb[0]}", verb,
                              setup=both(write("a.json", _audit_text(mutate)), write("b.json", _audit_text()))))
    for kind in NPZ_DAMAGE:
        out.append(Attack(f"audit-arrays:{kind}", ["compare", "{tmp}/a.json", "{tmp}/b.json"], setup=_npz(kind)))
    out.append(Attack("audit-name:mathtext", ["compare", "{tmp}/a.json", "{tmp}/b.json", "--out", "{tmp}/cmp"],
                      expect="finish", setup=both(write("a.json", _audit_text(subject="$\\foo{$")),
                                                   write("b.json", _audit_text(_tensor("digest", _audit_digest()),
                                                                                subject="$\\foo{$")))))
    base = (ROOT / "contracts.toml").read_text()
    line = '\n[[contract]]\nsubject = "chainer.embed_id"\ndevice = "cpu"\ncontext = "blas1"\nreason = "r"\n'
    defect = '\n[[known_defect]]\nsubjects = ["chainer.embed_id"]\nreason = "r"\nreference = "x"\n'
    contradictions = {
        "version-1.0": base.replace("version = 1\n", "version = 1.0\n", 1),
        "invariant-not-reproducible": base + line + 'reproducible = false\ninvariant_under = ["order"]\n',
        "invariant-declared-nondeterministic": base + line.replace('"cpu"', '"gpu"')
        + 'reproducible = true\ninvariant_under = ["order"]\n',
        "identical-across-itself": base + line + 'reproducible = true\nidentical_across = ["blas1"]\n',
        "identical-across-star": base + line + 'reproducible = true\nidentical_across = ["*"]\n',
        "errors-with-no-error": base + '\n[[bad_input]]\ntag = "bad:w_rank"\noutcome = "no_error"\nerrors = []\n'
                                       'reason = "r"\n',
        "wrong-names-no-tensor": base + defect + 'tags = ["ids:empty"]\nwrong = ["grad.Q"]\n',
        "tag-nothing-generates": base + defect + 'tags = ["bad:nope"]\nerror = "ValueError"\nphase = "forward"\n',
        "rule-tag-nothing-generates": base + '\n[[bad_input]]\ntag = "colour:red"\noutcome = "no_error"\n'
                                             'reason = "r"\n',
        "error-not-exception": base + defect + 'tags = ["ids:empty"]\nerror = "it broke!"\nphase = "forward"\n',
    }
    for name, text in contradictions.items():
        out.append(Attack(f"contracts-contradiction:{name}", ["gate", "--devices", "cpu", "--out", "{tmp}/run",
                                                              "--quiet", "--contracts", "{tmp}/c.toml"],
                          setup=write("c.toml", text)))
    return out


def _audit_digest() -> str:
    import numpy as np

    from harness.judge.comparator import digest

    return digest(np.ones((2, 3), np.float32))
