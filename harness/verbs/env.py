"""``harness env``: the environment fingerprint (Python, Chainer, NumPy, CuPy, CUDA, BLAS, GPU, variables)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from harness.core.options import opt

__all__ = ["EnvOptions", "env"]


@dataclass(frozen=True)
class EnvOptions:
    json: bool = opt("--json", "print it as JSON", default=False, switch=True)
    check: bool = opt("--check", "one line per set-up problem; exit 2 if unusable", default=False, switch=True)


def env(opts: EnvOptions) -> int:
    """0 printed (with ``check``: the CPU stack is usable); 2 with ``check``: Chainer or ESPnet unusable."""
    from harness.core.env import check_exit, fingerprint, flatten_fingerprint

    fp = fingerprint()
    if opts.check:
        for p in fp["problems"]:
            print(f"harness: {p}", file=sys.stderr)
        print(f"harness env: chainer {fp['chainer'].get('version')}, numpy {fp['packages']['numpy']}, "
              f"espnet {fp['packages']['espnet']}, compat patches {fp['compat_patches'] or 'none'}, "
              f"gpu: {fp['gpu']['presence_reason']} (CuPy: {fp['gpu']['reason']})")
        return check_exit(fp)
    if opts.json:
        print(json.dumps(fp, indent=2, sort_keys=True))
    else:
        for k, v in flatten_fingerprint(fp).items():
            print(f"{k:40s} {v}")
    return 0
