"""Drawing a case's arrays from its seed and spec: one private random stream per array name.

Every array a case does not hold explicitly is drawn from
``numpy.random.Generator(PCG64(SeedSequence([seed, crc32(name)])))`` (:func:`array_rng`): one stream per array
name, so adding or making explicit one array never changes the bits of another, and the global NumPy random
state is never touched. The draws follow the spec's kinds (ids uniform, collision-heavy, all equal or sorted,
with an ignore-label fraction; padded rows; upstream gradients random, ones, zeros, large or cancelling; LSTM
weights at LeCun's scale or a chaotic one). They are kept apart from :class:`harness.core.cases.Case` so that
the record stays a record: this module says what the bits are, the case says what it is.
"""

from __future__ import annotations

import atexit
import mmap
import os
import shutil
import tempfile
import zlib
from typing import Any, Mapping

import numpy as np

from harness.core import lifeline
from harness.core.case_arrays import lstm_weight_shapes
from harness.core.errors import CaseError

__all__ = ["array_rng", "draw_arrays", "SHARED_ENV", "SHARED_MIN_BYTES", "SHARED_MAX_BYTES", "shared_folder",
           "load_shared", "store_shared"]


def array_rng(seed: int, name: str) -> np.random.Generator:
    """The private generator of one named array of a case."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode())])))


#: Elements drawn at a time by :func:`_normal` (an 8 MiB float64 buffer).
_CHUNK = 1 << 20


def _normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, scale: Any = None) -> np.ndarray:
    """``(rng.standard_normal(shape) * scale).astype(dtype)`` bit for bit (the generator's stream is the same
    drawn in pieces, and the product and the cast are element by element), a chunk at a time: no float64
    temporaries of the whole array's size (an embedding of 65,000 x 1,000 drew 520 MB twice over)."""
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    buf = np.empty(min(flat.size, _CHUNK))
    for start in range(0, flat.size, _CHUNK):
        part = buf[:min(_CHUNK, flat.size - start)]
        rng.standard_normal(out=part)
        if scale is not None and scale != 1.0:  # (x * 1.0 is x, bit for bit: a normal is never a NaN)
            part *= scale
        flat[start:start + part.size] = part
    return out


def _zero_some(rng: np.random.Generator, out: np.ndarray, p: float) -> None:
    """``out.ravel()[rng.random(out.size) < p] = 0`` bit for bit (``out`` C-contiguous), a chunk at a time."""
    flat = out.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        part = flat[start:start + _CHUNK]
        part[rng.random(part.size) < p] = 0


def _grad(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, kind: str) -> np.ndarray:
    if kind == "ones":
        return np.ones(shape, dtype=dtype)
    if kind == "zeros":
        return np.zeros(shape, dtype=dtype)
    if kind == "cancel":
        # Pairs of nearly opposite values make sums cancel, so accumulation order shows in the bits.
        g = rng.standard_normal(shape)
        big = np.where(rng.random(shape) < 0.5, -1.0, 1.0) * (1e2 if dtype == "float16" else 1e4)
        return (big + g * 1e-2).astype(dtype)
    # Large but finite in every dtype: float16 tops out at 65504.
    out = _normal(rng, shape, dtype, (1e3 if dtype == "float16" else 1e6) if kind == "large" else None)
    if kind == "random" and out.size:
        _zero_some(rng, out, 0.05)  # exact zeros too
    return out


def _ids(spec: Mapping[str, Any], rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    vocab = int(spec["vocab"])
    kind = spec.get("id_kind", "uniform")
    n = int(np.prod(shape)) if shape else 1
    if kind == "all_equal":
        flat = np.full(n, int(rng.integers(0, vocab)), dtype=np.int64)
    elif kind == "collision":
        distinct = max(1, min(int(spec.get("distinct", 2)), vocab))
        pool = rng.choice(vocab, size=distinct, replace=False)
        flat = pool[rng.integers(0, distinct, size=n)]
    else:
        flat = rng.integers(0, vocab, size=n)
        if kind == "sorted":
            flat = np.sort(flat)
    ids = flat.reshape(shape)
    il = spec.get("ignore_label")
    frac = float(spec.get("ignore_frac", 0.0))
    if il is not None and frac > 0 and ids.size:
        mask = rng.random(shape) < frac
        if frac >= 1.0:
            mask[...] = True
        ids = np.where(mask, il, ids)
    return ids


def _padded(spec: Mapping[str, Any], ids: np.ndarray, lengths: list[int]) -> np.ndarray:
    """``(batch, steps)`` ids with row ``i`` cut to ``lengths[i]`` and padded with ``pad_id`` (else the ignore
    label), its first id ``sos_id`` where the spec gives one (ESPnet's decoder input: sos y_1 .. y_n eos eos)."""
    pad = spec.get("pad_id", spec.get("ignore_label"))
    if pad is None:
        raise CaseError(f"$.spec.row_lengths={lengths!r} pads its rows: give pad_id or ignore_label")
    keep = np.arange(ids.shape[1])[None, :] < np.asarray(lengths, dtype=np.int64)[:, None]
    out = np.where(keep, ids, int(pad))
    if spec.get("sos_id") is not None and out.shape[1]:
        out[:, 0] = np.where(keep[:, 0], int(spec["sos_id"]), out[:, 0])
    return out


def _as_id_dtype(ids: np.ndarray, dtype: str) -> np.ndarray:
    # Deliberately a plain cast: an out-of-range value wraps, which is what a user's cast would do.
    return ids.astype(dtype)


def _lstm_arrays(spec: Mapping[str, Any], seed: int, in_size: int, lengths: list[int],
                 out: dict[str, np.ndarray], with_xs: bool, names: frozenset[str] | None) -> None:
    dtype = spec.get("dtype", "float32")
    hidden = int(spec["hidden"])
    n_layers = int(spec["n_layers"])
    bi = bool(spec.get("bidirectional", False))
    dirs = 2 if bi else 1
    batch = len(lengths)
    scale = float(spec.get("w_scale", 1.0))
    kind = spec.get("weight_kind", "lecun")
    widths = spec.get("xs_widths")  # bad inputs: per-sequence widths that disagree
    def want(name: str) -> bool:
        return names is None or name in names

    if with_xs:
        for i, n in enumerate(lengths):
            if not want(f"xs.{i}"):
                continue
            w = int(widths[i]) if widths is not None else in_size
            out[f"xs.{i}"] = array_rng(seed, f"xs.{i}").standard_normal((n, w)).astype(dtype)
    for name, shape in lstm_weight_shapes(n_layers, in_size, hidden, bi):
        if not want(name):
            continue
        # lecun: N(0, 1/fan_in), Chainer's own default (LeCunNormal) for NStepLSTM, what a trained model is
        # near; chaotic: N(0, 0.25) whatever the width, a network that amplifies (kept for stress). Biases are
        # drawn at the same scale as their matrices' rows.
        k, j = (int(v) for v in name.split(".")[1:])
        fan_in = (in_size if k // dirs == 0 else hidden * dirs) if j < 4 else hidden
        base = 0.5 if kind == "chaotic" else 1.0 / np.sqrt(max(1, fan_in))
        out[name] = _normal(array_rng(seed, name), shape, dtype, scale * base)
    if spec.get("initial_state", "none") == "given":
        for name in ("hx", "cx"):
            if want(name):
                out[name] = array_rng(seed, name).standard_normal((n_layers * dirs, batch, hidden)).astype(dtype)
    kind = spec.get("gy_kind", "random")
    for i, n in enumerate(lengths):
        if want(f"gys.{i}"):
            out[f"gys.{i}"] = _grad(array_rng(seed, f"gys.{i}"), (n, hidden * dirs), dtype, kind)
    for name in ("ghy", "gcy"):
        if want(name):
            out[name] = _grad(array_rng(seed, name), (n_layers * dirs, batch, hidden), dtype, kind)


def draw_arrays(family: str, seed: int, spec: Mapping[str, Any],
                names: frozenset[str] | None = None) -> dict[str, np.ndarray]:
    """Every drawn input array of a case of ``family`` (explicit arrays and ``inject`` are the case's own:
    :func:`harness.core.cases.build_arrays` adds them). A spec these draws cannot follow raises what NumPy
    raises (``KeyError``, ``ValueError`` ...); the caller names the case. ``names`` (optional): only those are
    drawn (each array has its own generator, so they are what a whole draw gives)."""
    out: dict[str, np.ndarray] = {}
    if family == "model":  # a training run draws its parameters and batches itself (harness.subjects.model_calls)
        return out
    if family == "embed":
        shape = tuple(int(n) for n in spec["ids_shape"])
        vocab, width = int(spec["vocab"]), int(spec["width"])
        wdt = spec.get("w_dtype", "float32")
        w_shape = tuple(spec.get("w_shape", (vocab, width)))
        if names is None or "x" in names:
            ids = _ids(spec, array_rng(seed, "x"), shape)
            if "row_lengths" in spec and ids.ndim == 2:  # a padded batch, as a recipe'spec decoder or LM feeds it
                rows = [int(n) for n in spec["row_lengths"]][:shape[0]]
                ids = _padded(spec, ids, rows + [shape[1]] * (shape[0] - len(rows)))
            out["x"] = _as_id_dtype(ids, spec.get("id_dtype", "int32"))
        if names is None or "W" in names:
            out["W"] = _normal(array_rng(seed, "W"), w_shape, wdt, float(spec.get("w_scale", 1.0)))
        if names is None or "gy" in names:
            out["gy"] = _grad(array_rng(seed, "gy"), shape + (width,), wdt, spec.get("gy_kind", "random"))
        if names is None or "ggW" in names:
            out["ggW"] = _normal(array_rng(seed, "ggW"), (vocab, width), wdt)
    elif family == "lstm":
        _lstm_arrays(spec, seed, int(spec["in_size"]), [int(n) for n in spec["lengths"]], out, True, names)
    else:  # pipeline
        lengths = [int(n) for n in spec["lengths"]]
        vocab, width = int(spec["vocab"]), int(spec["width"])
        il = spec.get("ignore_label")
        if names is None or "x" in names:
            ids = _ids({**spec, "ignore_label": None}, array_rng(seed, "x"), (len(lengths), max(lengths)))
            ids = _padded({**spec, "pad_id": spec.get("pad_id", -1 if il is None else il)}, ids, lengths)
            out["x"] = ids.astype(spec.get("id_dtype", "int32"))
        if names is None or "W" in names:
            out["W"] = _normal(array_rng(seed, "W"), (vocab, width), spec.get("dtype", "float32"))
        _lstm_arrays(spec, seed, width, lengths, out, False, names)
    return out


# ---- large draws, once per harness process and shared with its workers -------------------------------------
#: The folder of shared draws a worker uses (set by :func:`harness.execute.zygote.worker_env` to its harness
#: process's :func:`shared_folder`).
SHARED_ENV = "HARNESS_SHARED_ARRAYS"
#: Drawn arrays of at least this many bytes are shared: drawn by the first process that needs them, written to
#: the harness process's folder, and mapped by every other (an embedding of 65,000 x 1,000 is two 260 MB
#: tables: each worker -- the subject's, the oracle's, the order reference's -- drew them anew, 2.8 s a process).
SHARED_MIN_BYTES = 1 << 20
#: Bytes of shared draws kept in the folder; beyond them the least recently used files go (a mapping outlives
#: its file's name, so a process using one is not disturbed; a later build draws that array again).
SHARED_MAX_BYTES = 2 << 30
_SHARED_PREFIX = "harness-arrays-"
_MADV_POPULATE_READ = 22  # Linux 5.14: map every page of a mapping now, without breaking its copy-on-write
_own: list[str] = []  # this process's own folder, once made


def shared_folder() -> str | None:
    """The folder of shared draws: a worker's harness process's (:data:`SHARED_ENV`), else this process's own in
    ``/dev/shm`` (made on first use, its name carrying this pid: :func:`harness.core.lifeline.owned_prefix`;
    the folders of harness processes that are gone are swept then; removed at exit). None where there is no
    ``/dev/shm`` with room: every process then draws its own arrays."""
    given = os.environ.get(SHARED_ENV)
    if given:
        return given if os.path.isdir(given) else None
    if _own:
        return _own[0] or None
    folder = ""
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= 2 * SHARED_MAX_BYTES and os.access("/dev/shm", os.W_OK):
            lifeline.sweep("/dev/shm", _SHARED_PREFIX)
            folder = tempfile.mkdtemp(prefix=lifeline.owned_prefix(_SHARED_PREFIX), dir="/dev/shm")
            atexit.register(_remove_own, folder, os.getpid())
    except OSError:
        folder = ""
    _own.append(folder)
    return folder or None


def _remove_own(folder: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child (which inherits the folder's name) leaves it to its owner
        shutil.rmtree(folder, ignore_errors=True)


def _shared_path(folder: str, case_id: str, name: str) -> str:
    return os.path.join(folder, f"{case_id}.{name}")


def load_shared(folder: str, case_id: str, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray | None:
    """The stored draw ``name`` of case ``case_id``, as this caller's own copy-on-write mapping of it (a write
    into the array changes this process's pages only, never the file, nor what another process maps), every
    page mapped now; None where it is not stored (or not whole)."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    path = _shared_path(folder, case_id, name)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if nbytes == 0 or os.fstat(fd).st_size != nbytes:
            return None
        m = mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        os.utime(fd)  # recently used: the last to go
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    try:
        m.madvise(_MADV_POPULATE_READ)  # the page faults now, not in the subject's first read of its input
    except (OSError, ValueError, AttributeError):
        pass
    return np.frombuffer(m, dtype=dt).reshape(shape)


def store_shared(folder: str, case_id: str, name: str, a: np.ndarray) -> None:
    """Keep the drawn ``a`` for every process of this harness process (written whole under a private name, then
    renamed, read-only; files beyond :data:`SHARED_MAX_BYTES` removed, least recently used first). A full or
    missing folder keeps nothing: the others then draw it themselves."""
    if a.nbytes > SHARED_MAX_BYTES:
        return
    tmp = os.path.join(folder, f".{case_id}.{name}.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            np.ascontiguousarray(a).tofile(f)
        os.chmod(tmp, 0o444)
        os.replace(tmp, _shared_path(folder, case_id, name))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    _trim(folder)


def _trim(folder: str) -> None:
    entries = []
    try:
        with os.scandir(folder) as it:
            for e in it:
                if not e.name.startswith("."):
                    st = e.stat()
                    entries.append((st.st_mtime, st.st_size, e.path))
    except OSError:
        return
    held = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if held <= SHARED_MAX_BYTES:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        held -= size
