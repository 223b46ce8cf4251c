"""harness.judge.digest: the digest's pinned format and algorithms, old SHA-256 digests, digests of two
algorithms never compared silently, layout and byte-order independence, no full-size copy, and the one-pass hash
and non-finite probe of large arrays."""

from __future__ import annotations

import hashlib
import tracemalloc

import blake3
import numpy as np
import pytest
import xxhash

from harness.core.errors import InvalidArgument
from harness.judge import digest as D
from harness.judge import ulp as B
from harness.judge.digest import (
    DIGEST_ALGORITHM,
    DIGEST_ALGORITHMS,
    digest,
    digest_algorithm_of,
    digest_all,
    digest_mismatch_reason,
    same_digest,
    short_digest,
)
from suites.unit.judge.known_arrays import _large_cases


def test_digest_pins_the_format():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    payload = b"float32|(2, 3)|" + a.tobytes()
    assert DIGEST_ALGORITHM == "xxh3_128"
    assert digest(a) == "xxh3_128:" + xxhash.xxh3_128(payload).hexdigest()
    assert digest(a, "sha256") == "sha256:" + hashlib.sha256(payload).hexdigest()
    assert digest(a, "blake3") == "blake3:" + blake3.blake3(payload).hexdigest()
    for alg, n_hex in DIGEST_ALGORITHMS.items():
        assert len(digest(a, alg)) == len(alg) + 1 + n_hex


def test_digest_rejects_an_unknown_algorithm():
    with pytest.raises(ValueError, match="algorithm='md5' is not one of"):
        digest(np.zeros(3), "md5")


def test_digest_names_its_algorithm_and_old_sha256_digests_are_recognised():
    a = np.arange(6, dtype=np.float32)
    legacy = hashlib.sha256(b"float32|(6,)|" + a.tobytes()).hexdigest()  # what digest() wrote before
    for alg in DIGEST_ALGORITHMS:
        assert digest_algorithm_of(digest(a, alg)) == alg
    assert digest_algorithm_of(legacy) == "sha256"
    assert same_digest(legacy, digest(a, "sha256"))  # the old form and the prefixed one are one digest
    assert same_digest(digest(a), digest(a.copy()))
    assert not same_digest(digest(a), digest(a + 1))
    for bad in ("missing", "xxh3_128:zz", "sha256:" + "0" * 10, "md5:" + "0" * 32, "", None):
        with pytest.raises(ValueError, match="is not '<algorithm>:<hex>'"):
            digest_algorithm_of(bad)


def test_digests_of_two_algorithms_never_compare_silently():
    a = np.arange(6, dtype=np.float32)
    x, s = digest(a), digest(a, "sha256")
    reason = digest_mismatch_reason(x, s)
    assert reason is not None and "xxh3_128" in reason and "sha256" in reason and "\n" not in reason
    assert digest_mismatch_reason(x, digest(a + 1)) is None
    with pytest.raises(InvalidArgument, match="digests of different algorithms cannot be compared"):
        same_digest(x, s)
    with pytest.raises(InvalidArgument):
        same_digest(s[len("sha256:"):], x)  # a legacy digest against a new one: refused too
    # the missing marker is a plain difference, not a confusion of algorithms
    assert digest_mismatch_reason("missing", x) is None
    assert not same_digest("missing", x) and same_digest("missing", "missing")


def test_short_digest_keeps_the_algorithm():
    d = digest(np.zeros(3))
    assert short_digest(d) == d[: len("xxh3_128:") + 12] and short_digest(d, 4).startswith("xxh3_128:")
    legacy = "ab" * 32
    assert short_digest(legacy, 8) == legacy[:8]


def test_digest_all_matches_digest_and_marks_missing():
    big = np.random.default_rng(1).standard_normal(2 ** 19)  # 4 MiB each: the threaded path
    arrs = [big, None, big + 1, np.zeros(3, np.int8)]
    for alg in DIGEST_ALGORITHMS:
        want = tuple("missing" if a is None else digest(a, alg) for a in arrs)
        assert digest_all(arrs, alg) == want
    assert digest_all([np.zeros(2), None]) == (digest(np.zeros(2)), "missing")


def test_digest_changes_with_dtype_and_shape_even_for_equal_bytes():
    a = np.arange(12, dtype=np.float32)
    as_int = a.view(np.int32)
    assert a.tobytes() == as_int.tobytes()
    assert digest(a) != digest(as_int)
    assert digest(a) != digest(a.reshape(3, 4))
    assert digest(a.reshape(3, 4)) != digest(a.reshape(4, 3))
    assert digest(np.zeros(0, np.float32)) != digest(np.zeros((0, 3), np.float32))


def test_digest_is_layout_and_byte_order_independent():
    a = np.arange(20, dtype=np.float64).reshape(4, 5)
    assert digest(a.T) == digest(np.ascontiguousarray(a.T))
    assert digest(a) == digest(a.astype(">f8"))
    assert digest(a) != digest(a.T)


def test_digest_makes_no_full_size_copy_of_a_contiguous_array():
    a = np.ones(2_000_000, dtype=np.float32)  # 8 MB
    tracemalloc.start()
    try:
        digest(a)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes // 10
    # and the control: a non-contiguous view does need its one copy
    tracemalloc.start()
    try:
        digest(a[::2])
        _, peak_strided = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_strided >= a.nbytes // 2


def test_digest_rejects_object_arrays():
    with pytest.raises(TypeError):
        digest(np.array([1, "x"], dtype=object))


@pytest.mark.parametrize("name", sorted(_large_cases()))
def test_the_one_pass_hash_and_probe_give_what_the_two_calls_give(name):
    a = _large_cases()[name]
    for alg in DIGEST_ALGORITHMS:
        assert D.digest_counted(a, alg) == (digest(a, alg), B.nonfinite_counts(a))
    exact = (int(np.isnan(a).sum()), int(np.isinf(a).sum())) if a.dtype.kind == "f" else (0, 0)
    assert B.nonfinite_counts(a) == exact
