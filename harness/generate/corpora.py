"""The embedded default corpus: a few hand-picked anchor cases plus generated ones from a fixed seed.

The anchors make sure every default campaign can show the things it exists to show: a
collision-heavy embedding (where unordered accumulation changes bits: the controls must split
there), an LSTM large enough that OpenBLAS splits its GEMMs across threads, an ESPnet-style
padded pipeline, and bad inputs of the kinds users hit. The real-scale cases take every default
campaign past the toy sizes: one per family at a real model's shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where cases are made: the command line reads DEFAULT_SEED without NumPy
    from harness.core.cases import Case

__all__ = ["PROFILE_EXAMPLES", "PROFILE_CAMPAIGN", "real_scale_cases", "profile_corpus", "anchor_cases",
           "relation_cases", "default_corpus", "campaign_corpus", "gate_corpus", "DEFAULT_SEED", "DEFAULT_EXAMPLES"]

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


def real_scale_cases() -> list[Case]:
    """One case per family at a real model's scale, cheap enough for every default gate and report (a small
    batch, one layer): a bidirectional LSTM over 100 steps at hidden 320 (WSJ's eunits: blstmp's first layer), 83
    features wide as an ASR encoder's input; an ESPnet decoder batch (30 targets of up to 150 ids + sos, odim
    5,000: 22.6 million ids x vocab, eos padding piled on one row); a word LM's 65,000-word vocabulary; a decoder-shaped
    pipeline (odim 5,000, 256 units, BPE-length targets). Sorted longest first, in ESPnet's convention (no
    ignore label, sos and eos padding = V - 1). Chainer's CPU LSTM costs per step (it stacks its weights at
    each), so the lengths, not the batch, set what these add to a gate. The configurations they come from are
    :data:`harness.generate.recipes.RECIPES`. Then the corners (:func:`harness.generate.recipes.corner_cases`):
    each dimension of each family at its recipe maximum with every other small (800 steps at hidden 4, hidden
    1,024 over 3 steps, the char LM's 1,024 x 151 eos-padded ids at width 4 ...), so that a change past any one
    size's last boundary shows in every default gate at the cost of that one size. (An LSTM over 200 steps at
    hidden 256 was here: the corners take steps to 800 and hidden to 1,024 apart, for less than it cost.) Each
    of these runs fewer times than the campaign's other cases, and only in the contexts that can change its bits
    at its size (:func:`harness.generate.dimensions.size_case_runs`)."""
    from harness.core.cases import Case
    from harness.generate.recipes import corner_cases

    def espnet(vocab: int) -> dict[str, int]:
        return {"pad_id": vocab - 1, "sos_id": vocab - 1}

    decoder_rows = [151 - 3 * i for i in range(30)]  # 151 .. 64: sorted longest first
    lm_rows = [41 - i for i in range(20)]  # 41 .. 22
    return [
        Case("lstm", 62, {"n_layers": 1, "in_size": 83, "hidden": 320, "lengths": [100, 50], "bidirectional": True},
             tags=("real-scale", "recipe:espnet1.asr.encoder.blstmp")),
        Case("embed", 63, {"vocab": 5000, "width": 320, "ids_shape": [30, 151], "row_lengths": decoder_rows,
                           **espnet(5000)}, tags=("real-scale", "recipe:espnet1.asr.decoder.bpe")),
        Case("embed", 64, {"vocab": 65_000, "width": 16, "ids_shape": [20, 41], "row_lengths": lm_rows,
                           **espnet(65_000)}, tags=("real-scale", "recipe:espnet1.lm.word")),
        Case("pipeline", 65, {"vocab": 5000, "width": 256, "hidden": 256, "n_layers": 1, "lengths": [64, 50, 37],
                              **espnet(5000)}, tags=("real-scale", "recipe:espnet1.asr.decoder.bpe")),
    ] + corner_cases()


#: Random cases per family of each profile's default corpus (``--profile``), at that profile's sizes; the
#: ``realistic`` profile's are drawn around the recipes' configurations (:func:`profile_corpus`).
PROFILE_EXAMPLES: dict[str, int | dict[str, int] | None] = {
    "ci": None, "dev": 12, "audit": 30, "realistic": {"embed": 5, "lstm": 2, "pipeline": 3}}
#: The campaign settings a profile changes where the command line does not give them (``harness report``): a
#: realistic case runs for seconds, so fewer repeats and fresh workers.
PROFILE_CAMPAIGN: dict[str, dict[str, int]] = {"realistic": {"repeats": 2, "fresh": 1}}


def profile_corpus(family: str, *, examples: int, seed: int, profile: str = "ci") -> list[Case]:
    """Generated cases of ``family`` at ``profile``: drawn around the recipes' configurations for
    ``realistic`` (:func:`harness.generate.recipes.recipe_corpus`, ``family="all"`` mixing the families), within
    the profile's :data:`~harness.generate.profile_sizes.SIZE_BOUNDS` otherwise."""
    from harness.generate.sampler import corpus

    if profile != "realistic":
        return corpus(family, examples=examples, seed=seed, profile=profile)
    from harness.core.cases import FAMILIES
    from harness.generate.recipes import recipe_corpus

    if family != "all":
        return recipe_corpus(family, examples=examples, seed=seed)
    shares = [examples // 3 + (1 if i < examples % 3 else 0) for i in range(3)]
    return [c for f, n in zip(FAMILIES, shares) for c in recipe_corpus(f, examples=n, seed=seed)]


def default_corpus(examples: dict[str, int] | int | None = None, seed: int = DEFAULT_SEED,
                   profile: str = "ci") -> list[Case]:
    """The edge set (:func:`harness.generate.edges.edge_cases`: one case for every edge kind), the anchors,
    the relation cases and ``examples`` generated cases per family (the ``profile``'s sizes, and its count
    from :data:`PROFILE_EXAMPLES` where ``examples`` is None), deduplicated by id."""
    if examples is None and PROFILE_EXAMPLES.get(profile) is not None:
        examples = PROFILE_EXAMPLES[profile]
    if profile not in PROFILE_EXAMPLES:
        from harness.core.errors import InvalidArgument

        raise InvalidArgument(f"profile={profile!r} is not one of {', '.join(PROFILE_EXAMPLES)}")
    if examples is None:
        per = dict(DEFAULT_EXAMPLES)
    elif isinstance(examples, int):
        per = {f: examples for f in DEFAULT_EXAMPLES}
    else:
        per = dict(examples)
    from harness.generate.edges import edge_cases, with_edge_tags

    # the edges first (every kind, once), then the anchors, the real-scale cases and the random cases; the
    # realistic profile also runs the size boundaries a CPU reaches cheaply and each encoder's longest sequences
    cases = edge_cases() + [with_edge_tags(c) for c in anchor_cases() + relation_cases() + real_scale_cases()]
    if profile == "realistic":
        from harness.generate.edges import CHEAP_SIZE_EDGES, size_edge_cases
        from harness.generate.recipes import full_length_cases

        cases.extend(with_edge_tags(size_edge_cases()[k]) for k in CHEAP_SIZE_EDGES)
        cases.extend(full_length_cases())
    for i, (family, n) in enumerate(sorted(per.items())):
        if n > 0:
            cases.extend(profile_corpus(family, examples=n, seed=seed + i, profile=profile))
    seen: dict[str, Case] = {}
    for c in cases:
        seen.setdefault(c.id, c)
    return list(seen.values())


def campaign_corpus(examples: dict[str, int] | int | None = None, seed: int = DEFAULT_SEED,
                    profile: str = "ci") -> list[Case]:
    """What a default report runs: the one-call corpus (:func:`default_corpus`) and the model cases whose
    training trajectories it compares (:func:`harness.generate.model_cases.trajectory_cases`: a few steps at
    ``ci`` sizes, the recipe slices' 100 steps in the ``realistic`` profile)."""
    from harness.generate.model_cases import trajectory_cases

    return default_corpus(examples, seed=seed, profile=profile) + trajectory_cases(profile)


def gate_corpus(seed: int = DEFAULT_SEED, bad_examples: int = 24, profile: str = "ci") -> list[Case]:
    """The campaign corpus plus generated bad inputs of every kind: what ``harness gate`` runs."""
    from harness.generate.sampler import bad_corpus

    cases = campaign_corpus(seed=seed, profile=profile) + bad_corpus(examples=bad_examples, seed=seed)
    seen: dict[str, Case] = {}
    for c in cases:
        seen.setdefault(c.id, c)
    return list(seen.values())
