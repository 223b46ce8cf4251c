"""The embedded default corpus: a few hand-picked anchor cases plus generated ones from a fixed seed.

The anchors make sure every default campaign can show the things it exists to show: a
collision-heavy embedding (where unordered accumulation changes bits: the controls must split
there), an LSTM large enough that OpenBLAS splits its GEMMs across threads, an ESPnet-style
padded pipeline, and bad inputs of the kinds users hit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where cases are made: the command line reads DEFAULT_SEED without NumPy
    from harness.core.cases import Case

__all__ = ["PROFILE_EXAMPLES", "anchor_cases", "relation_cases", "default_corpus", "gate_corpus", "DEFAULT_SEED", "DEFAULT_EXAMPLES"]

DEFAULT_SEED = 20261202
DEFAULT_EXAMPLES = {"embed": 6, "lstm": 4, "pipeline": 3}


def anchor_cases() -> list[Case]:
    """The hand-picked cases every default campaign includes."""
    from harness.core.cases import Case

    return [
        Case("embed", 11, {"vocab": 3, "width": 4, "ids_shape": [400], "id_kind": "collision", "distinct": 2},
             tags=("anchor", "collision")),
        Case("embed", 12, {"vocab": 50, "width": 8, "ids_shape": [8, 16], "id_kind": "collision", "distinct": 5,
                           "ignore_label": -1, "ignore_frac": 0.25}, tags=("anchor", "ignore:-1")),
        Case("embed", 13, {"vocab": 20, "width": 4, "ids_shape": [6, 5], "ignore_label": 19, "ignore_frac": 0.3,
                           "gy_kind": "cancel"}, tags=("anchor", "ignore:V-1")),
        # Measured here: OpenBLAS splits the (512 x 600) @ (600 x 64) input GEMM differently at 1 and
        # 2 threads, so the bits of every output differ between the blas1 and blas2 contexts.
        # Ignore label -1 with the last row V-1 in use: ESPnet's GPU backward zeroes column
        # `ignore_label` of its one-hot matrix, and column -1 is row V-1's (read from the code;
        # the GPU run shows whether grad.W[V-1] loses its gradient).
        Case("embed", 14, {"vocab": 4, "width": 3, "ids_shape": [5, 6], "ignore_label": -1, "ignore_frac": 0.3},
             tags=("anchor", "ignore:-1", "uses:V-1")),
        Case("lstm", 21, {"n_layers": 1, "in_size": 600, "hidden": 16, "lengths": [16] * 32,
                          "initial_state": "given"}, tags=("anchor", "blas-split")),
        Case("lstm", 22, {"n_layers": 2, "in_size": 5, "hidden": 6, "lengths": [4, 1, 3, 2],
                          "bidirectional": True}, tags=("anchor", "unsorted", "bi")),
        Case("pipeline", 31, {"vocab": 30, "width": 8, "hidden": 8, "n_layers": 1, "lengths": [5, 3, 4],
                              "ignore_label": -1, "id_kind": "collision", "distinct": 4}, tags=("anchor",)),
        Case("embed", 41, {"vocab": 5, "width": 3, "ids_shape": [6],
                           "inject": [{"array": "x", "index": 2, "value": 7}]},
             expect={"kind": "raises", "errors": ["IndexError", "ValueError"],
                     "behaviour": "an id >= vocab fails NumPy indexing"}, tags=("anchor", "bad:id_out_of_range_high")),
        Case("embed", 42, {"vocab": 5, "width": 3, "ids_shape": [6], "w_dtype": "float16"},
             expect={"kind": "raises", "errors": ["InvalidType"], "subjects": ["espnet.embed_id", "espnet.EmbedID"],
                     "behaviour": "ESPnet's type check accepts only float32 W; Chainer accepts float16"},
             tags=("anchor", "bad:w_dtype_espnet")),
    ]


def relation_cases() -> list[Case]:
    """Cases for the invariance relations: an LSTM batch with tied lengths wide enough (in and hidden 64) that
    OpenBLAS's GEMM kernels change bits with the batch's size and order (measured here: alone, sub-batch,
    reversed and duplicated sequences all differ from the whole batch's), and a collision-heavy 2-D id batch
    whose embedding gradient sums rows in another order when they are permuted."""
    from harness.core.cases import Case

    return [
        Case("lstm", 51, {"n_layers": 1, "in_size": 64, "hidden": 64, "lengths": [5, 4, 4, 2]},
             tags=("relations", "lengths:ties")),
        Case("embed", 52, {"vocab": 50, "width": 8, "ids_shape": [16, 8], "id_kind": "collision", "distinct": 5},
             tags=("relations", "collision")),
    ]


#: Random cases per family of each profile's default corpus (``--profile``), at that profile's sizes.
PROFILE_EXAMPLES = {"ci": None, "dev": 12, "audit": 30}


def default_corpus(examples: dict[str, int] | int | None = None, seed: int = DEFAULT_SEED,
                   profile: str = "ci") -> list[Case]:
    """The edge set (:func:`harness.generate.edges.edge_cases`: one case for every edge kind), the anchors,
    the relation cases and ``examples`` generated cases per family (the ``profile``'s sizes, and its count
    from :data:`PROFILE_EXAMPLES` where ``examples`` is None), deduplicated by id."""
    from harness.generate.strategies import corpus

    if examples is None and PROFILE_EXAMPLES.get(profile) is not None:
        examples = PROFILE_EXAMPLES[profile]
    if examples is None:
        per = dict(DEFAULT_EXAMPLES)
    elif isinstance(examples, int):
        per = {f: examples for f in DEFAULT_EXAMPLES}
    else:
        per = dict(examples)
    from harness.generate.edges import edge_cases, with_edge_tags

    # the edges first (every kind, once), then the anchors and the random cases
    cases = edge_cases() + [with_edge_tags(c) for c in anchor_cases() + relation_cases()]
    for i, (family, n) in enumerate(sorted(per.items())):
        if n > 0:
            cases.extend(corpus(family, examples=n, seed=seed + i, profile=profile))
    seen: dict[str, Case] = {}
    for c in cases:
        seen.setdefault(c.id, c)
    return list(seen.values())


def gate_corpus(seed: int = DEFAULT_SEED, bad_examples: int = 24, profile: str = "ci") -> list[Case]:
    """The default corpus plus generated bad inputs of every kind: what ``harness gate`` runs."""
    from harness.generate.strategies import bad_corpus

    cases = default_corpus(seed=seed, profile=profile) + bad_corpus(examples=bad_examples, seed=seed)
    seen: dict[str, Case] = {}
    for c in cases:
        seen.setdefault(c.id, c)
    return list(seen.values())
