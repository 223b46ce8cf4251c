"""First step of .ci/gpu-session.sh on the GPU machine: does Chainer (through the harness's compat layer)
see CuPy, and do the three kinds of subject run forward and backward there? Tracebacks are printed whole,
so a failure of the stack (not of a determinism check) is read off this one log."""
import sys
import traceback

import numpy

from harness.core.compat import import_chainer
from harness.core.devices import gpu_presence

print("python", sys.version.split()[0], "numpy", numpy.__version__)
print("gpu presence:", *gpu_presence())
chainer = import_chainer()
from chainer.backends import cuda  # noqa: E402

print("chainer", chainer.__version__, "cuda.available", cuda.available, "cudnn_enabled", cuda.cudnn_enabled,
      "resolution error:", repr(getattr(cuda, "_resolution_error", None)))
import cupy  # noqa: E402

print("cupy", cupy.__version__, "runtime", cupy.cuda.runtime.runtimeGetVersion(),
      "driver", cupy.cuda.runtime.driverGetVersion(), cupy.cuda.runtime.getDeviceProperties(0)["name"])
F, L = chainer.functions, chainer.links
rng = numpy.random.default_rng(0)
failed = 0


def check(name, fn):
    global failed
    try:
        a, b = fn(), fn()
        same = all(numpy.array_equal(x.view(numpy.uint8), y.view(numpy.uint8)) for x, y in zip(a, b))
        print(f"{name}: ok, shapes {[x.shape for x in a]}, two runs bit-identical: {same}")
    except Exception:  # noqa: BLE001 - the point is the traceback
        failed += 1
        print(f"{name}: FAILED")
        traceback.print_exc(file=sys.stdout)


ids = rng.integers(-1, 1000, size=20000).astype(numpy.int32)
W0 = rng.standard_normal((1000, 16)).astype(numpy.float32)


def embed(fn):
    def run():
        W = chainer.Variable(cupy.asarray(W0))
        y = fn(cupy.asarray(ids), W)
        y.grad = cupy.ones_like(y.array)
        y.backward()
        return cupy.asnumpy(y.array), cupy.asnumpy(W.grad)
    return run


check("F.embed_id", embed(lambda x, W: F.embed_id(x, W, ignore_label=-1)))
try:
    from espnet.nets.chainer_backend.deterministic_embed_id import embed_id as det_embed_id
    check("espnet embed_id", embed(lambda x, W: det_embed_id(x, W, ignore_label=-1)))
except Exception:  # noqa: BLE001
    failed += 1
    traceback.print_exc(file=sys.stdout)


def lstm(bi):
    def run():
        numpy.random.seed(0)  # Chainer draws the link's initial weights from NumPy's global generator
        link = (L.NStepBiLSTM if bi else L.NStepLSTM)(2, 8, 16, 0.0)
        link.to_device("@cupy:0")
        r = numpy.random.default_rng(1)
        xs = [chainer.Variable(cupy.asarray(r.standard_normal((n, 8)).astype(numpy.float32))) for n in (7, 5, 2)]
        hy, cy, ys = link(None, None, xs)
        loss = F.sum(hy) + sum(F.sum(y * y) for y in ys)
        loss.backward()
        return cupy.asnumpy(hy.array), cupy.asnumpy(ys[0].array), cupy.asnumpy(link[0].w0.grad)
    return run


check("NStepLSTM", lstm(False))
check("NStepBiLSTM", lstm(True))
sys.exit(1 if failed else 0)
