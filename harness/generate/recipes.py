"""The ``realistic`` profile's table: named configurations from published recipes, and cases drawn around them.

Every case the ``ci``, ``dev`` and ``audit`` profiles draw is small (hidden <= 128, <= 64 steps). The models
users audit are an order of magnitude larger, and what breaks reproducibility changes with size: which GEMM
kernel BLAS picks and how it splits a reduction, how many ids pile onto one row, how deep a float32 sum gets.
:data:`RECIPES` holds the shapes real recipes run, each row citing where its numbers come from, with the
conventions of the code that runs them:

- ``espnet``: ESPnet1's chainer decoder and RNN language model embed with
  ``deterministic_embed_id.EmbedID(odim, dunits)`` and **no ignore label**; their id batches start with sos
  and are padded with eos, both the last id ``odim - 1`` (``pad_id`` and ``sos_id`` of the spec);
- ``chainer``: Chainer's own convention, padding with ``-1`` and ``ignore_label=-1``;
- every ragged batch is sorted longest first (ESPnet sorts its minibatches by length), and the features are
  as wide as the recipe's (83: 80 filterbanks and 3 pitch features).

Cases are drawn *around* a configuration, not only at its corners: each size is drawn within the row's range
(by the same sources of choices as the strategies, :mod:`harness.generate.choices`, so a Hypothesis strategy
over the table shrinks and explores like any other). Two scales:

- ``slice`` (the profile's default corpus and pytest gate): the real widths, hidden sizes, vocabularies and
  lengths, with a slice of the batch (a few sequences) and at most :data:`SLICE_LAYERS` layer, and each run's
  work and embedding table capped (:data:`SLICE_STEP_WEIGHTS`, :data:`SLICE_TABLE`) so that a CPU report stays minutes;
- ``full``: the recipe's whole batch, layers and tables, for a device with the memory (:func:`full_case` is
  each configuration's largest corner, which ``cases --coverage`` prices).

A drawn case carries the tag ``recipe:<name>``; :func:`recipe_of` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from harness.core.cases import Case
from harness.core.errors import InvalidArgument
from harness.generate.choices import HypothesisSource, RandomSource, Source
from harness.generate.dimensions import BOUNDARIES, dimension_kind, dimension_value
from harness.generate.edges import with_edge_tags

if TYPE_CHECKING:
    from hypothesis import strategies as st

__all__ = ["Recipe", "RECIPES", "SCALES", "SLICE_BATCH", "SLICE_LAYERS", "SLICE_STEP_WEIGHTS", "SLICE_TABLE",
           "recipe_of", "recipes_for", "draw_recipe_case", "recipe_cases", "recipe_corpus", "full_case",
           "step_weights", "Dimension", "DIMENSIONS", "corner_cases", "full_length_cases", "SLICE_PEAK"]

_WSJ_RNN = "espnet/espnet egs/wsj/asr1/conf/tuning/train_rnn.yaml"
_RUN_SH = "espnet/espnet egs/wsj/asr1/run.sh and egs/tedlium2/asr1/run.sh (the 'rnnlm related' block)"
_FBANK = "80 filterbanks + 3 pitch features: egs/*/asr1/run.sh steps/make_fbank_pitch.sh, conf/fbank.conf"


@dataclass(frozen=True)
class Recipe:
    """One named configuration. Ranges are inclusive ``(lo, hi)``; ``max_len`` counts the steps the LSTM or
    the embedding sees (after any subsampling; a decoder's ids include sos)."""

    name: str
    families: tuple[str, ...]
    #: ``espnet`` (no ignore label, sos first, eos padding, both V-1) or ``chainer`` (padding and ignore -1)
    convention: str
    in_size: tuple[int, ...]  # the LSTM's input widths (lstm family); () where an embedding feeds it
    hidden: tuple[int, int]   # hidden units (eunits, dunits, lm units); the embedding width where one feeds it
    layers: tuple[int, int]
    bidirectional: bool
    vocab: tuple[int, int]    # (0, 0) for an encoder
    batch: tuple[int, int]
    max_len: tuple[int, int]  # the longest sequence of a batch: (lo, hi)
    source: str

    def full(self) -> dict[str, int]:
        """The configuration's largest corner."""
        return {"hidden": self.hidden[1], "layers": self.layers[1], "vocab": self.vocab[1], "batch": self.batch[1],
                "max_len": self.max_len[1], "in_size": max(self.in_size, default=0)}


#: The named configurations (one place: the profile's corpus, its strategies and ``cases --coverage`` read it).
RECIPES: tuple[Recipe, ...] = (
    Recipe("espnet1.asr.encoder.blstmp", ("lstm",), "espnet", in_size=(83, 320), hidden=(320, 1024),
           layers=(1, 1), bidirectional=True, vocab=(0, 0), batch=(20, 30), max_len=(200, 800),
           source=f"{_WSJ_RNN}: etype vggblstmp/blstmp, elayers 6, eunits 320, eprojs 320, subsample 1_2_2_1_1, "
                  f"batch-size 30, maxlen-in 800; librispeech's RNN recipe eunits 1024. blstmp runs one "
                  f"NStepBiLSTM(1, in, eunits) per layer (espnet/nets/chainer_backend/rnn/encoders.py RNNP): the "
                  f"first over all frames (in 83: {_FBANK}), the next over eprojs-wide frames subsampled by 2-4"),
    Recipe("espnet1.asr.encoder.blstm", ("lstm",), "espnet", in_size=(83,), hidden=(320, 1024), layers=(4, 6),
           bidirectional=True, vocab=(0, 0), batch=(20, 30), max_len=(100, 400),
           source=f"{_WSJ_RNN}: elayers 4-6, eunits 320-1024, batch-size 20-30, maxlen-in 800 frames subsampled "
                  f"by 2-4; one NStepBiLSTM(elayers, 83, eunits) (encoders.py RNN), in 83: {_FBANK}"),
    Recipe("espnet1.asr.decoder.char", ("embed", "pipeline"), "espnet", in_size=(), hidden=(300, 1024),
           layers=(1, 1), bidirectional=False, vocab=(50, 300), batch=(20, 30), max_len=(60, 151),
           source=f"{_WSJ_RNN}: dunits 300 (1024 in librispeech's), dlayers 1, maxlen-out 150 (+ sos), batch-size "
                  f"30; odim 50-300 characters; espnet/nets/chainer_backend/rnn/decoders.py: "
                  f"DL.EmbedID(odim, dunits) without ignore label, ys_in = sos + y padded with eos = odim - 1"),
    Recipe("espnet1.asr.decoder.bpe", ("embed", "pipeline"), "espnet", in_size=(), hidden=(300, 1024),
           layers=(1, 1), bidirectional=False, vocab=(4900, 5100), batch=(20, 30), max_len=(40, 151),
           source="as espnet1.asr.decoder.char with a ~5,000-unit BPE vocabulary (egs/librispeech/asr1/run.sh "
                  "nbpe=5000), dunits 1024 (its RNN train.yaml)"),
    Recipe("espnet1.lm.word", ("embed", "pipeline"), "espnet", in_size=(), hidden=(1000, 1000), layers=(1, 1),
           bidirectional=False, vocab=(65000, 65000), batch=(300, 600), max_len=(20, 41),
           source=f"{_RUN_SH}: use_wordlm=true, lm_vocabsize=65000, lm_units=1000, lm_layers=1, lm_batchsize "
                  f"300-600, lm_maxlen=40 (+ sos); espnet/lm/chainer_backend/lm.py DL.EmbedID(n_vocab, n_units), "
                  f"sentences between sos and eos = n_vocab - 1"),
    Recipe("espnet1.lm.char", ("embed", "pipeline"), "espnet", in_size=(), hidden=(650, 650), layers=(2, 2),
           bidirectional=False, vocab=(50, 300), batch=(1024, 1024), max_len=(60, 151),
           source=f"{_RUN_SH}: character LMs: lm_units 650, lm_layers 2, lm_batchsize 1024, lm_maxlen 150"),
    Recipe("chainer.padded_decoder", ("embed", "pipeline"), "chainer", in_size=(), hidden=(300, 1024),
           layers=(1, 2), bidirectional=False, vocab=(50, 5100), batch=(20, 30), max_len=(40, 150),
           source="the ESPnet decoder's sizes under Chainer's own convention: ids padded with -1 and "
                  "L.EmbedID(..., ignore_label=-1) (chainer/links/connection/embed_id.py), the label "
                  "chainer/functions/loss/softmax_cross_entropy.py ignores by default (ignore_label=-1)"),
)
SCALES = ("slice", "full")
#: Sequences of a ``slice``-scale LSTM or pipeline batch (a real batch's longest ones).
SLICE_BATCH = 3
#: Layers of a ``slice``-scale case (blstmp runs one per call anyway).
SLICE_LAYERS = 1
#: The most elements of stacked step weights (:func:`step_weights`) of one ``slice``-scale run (hidden 320 over
#: 100 steps, bidirectional, 83 features): the lengths (not below 100 steps), then the hidden size give way
#: until a case fits.
SLICE_STEP_WEIGHTS = 105_000_000
#: The most elements of a ``slice``-scale embedding table: a 65,000 x 1,000 table (the word LM's) is a minute and
#: 6 GB per run on a CPU; the width gives way, the vocabulary never.
SLICE_TABLE = 1 << 23
#: ESPnet's batches: the shortest sequence of a batch is at least this fraction of its longest (sorted by length).
_SPREAD = 0.4


def step_weights(lengths: Sequence[int], in_size: int, hidden: int, layers: int, bidirectional: bool) -> int:
    """Elements of the weights Chainer's CPU NStepLSTM stacks at every step of every layer and direction (a
    ``(4H, in + H)`` pair each, kept for backward): what its runs cost in time and memory far more than their
    arithmetic (measured here: hidden 526 over 248 steps, bidirectional, is 5 GB and half a minute a run)."""
    dirs = 2 if bidirectional else 1
    longest = max(lengths, default=0)
    return sum(dirs * longest * 4 * hidden * ((in_size if layer == 0 else hidden * dirs) + hidden)
               for layer in range(layers))


def recipe_of(case: Case) -> str | None:
    """The configuration a case was drawn around (its ``recipe:<name>`` tag), or None."""
    return next((t.split(":", 1)[1] for t in case.tags if t.startswith("recipe:")), None)


def recipes_for(family: str) -> list[Recipe]:
    """The configurations that draw cases of ``family``."""
    return [r for r in RECIPES if family in r.families]


def _lengths(src: Source, r: Recipe, batch: int) -> list[int]:
    """A ragged batch sorted longest first: the longest within the row's range, the others at least
    :data:`_SPREAD` of it, a tie now and then (utterances of the same length)."""
    longest = src.around(*r.max_len, BOUNDARIES[("lstm", "steps")])
    shortest = max(1, int(longest * _SPREAD))
    rest = sorted((src.integer(shortest, longest) for _ in range(batch - 1)), reverse=True)
    return [longest] + rest


def _fit(lengths: list[int], in_size: int, hidden: int, layers: int, bi: bool, lo_hidden: int, keep_long: bool
         ) -> tuple[list[int], int]:
    """Shrink a slice until :func:`step_weights` is within :data:`SLICE_STEP_WEIGHTS`. ``keep_long``: cut every
    length in proportion down to 100 steps, then lower the hidden size down to the row's smallest; else keep the
    drawn hidden size and cut the lengths. Either way the lengths last (more sequences cost little: the stacked
    weights are per step, not per sequence)."""
    def over() -> bool:
        return step_weights(lengths, in_size, hidden, layers, bi) > SLICE_STEP_WEIGHTS

    def cut(floor: int) -> None:
        nonlocal lengths
        while over() and lengths[0] > floor:
            top = max(floor, lengths[0] * 9 // 10)
            lengths = [max(1, n * top // lengths[0]) for n in lengths]

    cut(100 if keep_long else 1)
    while over() and hidden > lo_hidden:
        hidden = max(lo_hidden, hidden * 9 // 10)
    cut(1)
    return lengths, hidden


def draw_recipe_case(src: Source, recipe: Recipe, family: str, scale: str = "slice") -> Case:
    """One case of ``family`` drawn around ``recipe`` at ``scale`` (:data:`SCALES`)."""
    r, full = recipe, scale == "full"
    hidden = src.around(*r.hidden, BOUNDARIES[("lstm", "hidden")])
    layers = src.integer(r.layers[0], r.layers[1] if full else min(r.layers[1], max(r.layers[0], SLICE_LAYERS)))
    if not full:
        layers = min(layers, SLICE_LAYERS)
    batch = src.integer(*r.batch) if full or family == "embed" else src.integer(2, min(SLICE_BATCH, r.batch[1]))
    tags = [f"recipe:{r.name}", f"convention:{r.convention}", f"scale:{scale}"]
    if family == "lstm":
        in_size = src.choice(r.in_size)
        lengths = _lengths(src, r, batch)
        if not full:
            lengths, hidden = _fit(lengths, in_size, hidden, layers, r.bidirectional, r.hidden[0], src.boolean())
        spec: dict[str, Any] = {"in_size": in_size, "hidden": hidden, "n_layers": layers, "lengths": lengths,
                                "bidirectional": r.bidirectional}
        return with_edge_tags(Case("lstm", src.integer(0, 2**32 - 1), spec, tags=tuple(tags) + ("lengths:sorted",)))
    vocab = src.around(*r.vocab, BOUNDARIES[("embed", "vocab")])
    lengths = _lengths(src, r, batch)
    ids = (batch * lengths[0]) if family == "embed" else 1
    # the slice keeps the vocabulary and the batch; the embedding's width gives way (the table, and an embedding's
    # output, at most SLICE_TABLE elements)
    width = hidden if full else max(1, min(hidden, SLICE_TABLE // vocab, SLICE_TABLE // ids))
    if width < hidden:
        tags.append("slice:width")
    padding = _padding(r.convention, vocab)
    if family == "embed":
        spec = {"vocab": vocab, "width": width, "ids_shape": [batch, lengths[0]], "row_lengths": lengths,
                "id_kind": "uniform", **padding}
        return with_edge_tags(Case("embed", src.integer(0, 2**32 - 1), spec, tags=tuple(tags)))
    if not full:
        lengths, hidden = _fit(lengths, width, hidden, layers, False, r.hidden[0], src.boolean())
    spec = {"vocab": vocab, "width": width, "hidden": hidden, "n_layers": layers, "lengths": lengths,
            "id_kind": "uniform", **padding}
    return with_edge_tags(Case("pipeline", src.integer(0, 2**32 - 1), spec, tags=tuple(tags) + ("lengths:sorted",)))


def _padding(convention: str, vocab: int) -> dict[str, Any]:
    """The spec keys of a convention's padded id batches (see the module doc)."""
    if convention == "espnet":
        return {"pad_id": vocab - 1, "sos_id": vocab - 1}
    return {"ignore_label": -1}


def _check(family: str, scale: str) -> None:
    families = sorted({f for r in RECIPES for f in r.families})
    if family not in families:
        raise InvalidArgument(f"family={family!r} is not one of {', '.join(families)}")
    if scale not in SCALES:
        raise InvalidArgument(f"scale={scale!r} is not one of {', '.join(SCALES)}")


def _draw_one(family: str, scale: str) -> Callable[[Source], Case]:
    rows = recipes_for(family)

    def draw(src: Source) -> Case:
        recipe = src.choice(rows)
        src.label(f"{family}.recipe", recipe.name)
        return draw_recipe_case(src, recipe, family, scale)

    return draw


def recipe_cases(family: str, *, scale: str = "slice", w32_only: bool = False) -> st.SearchStrategy[Case]:
    """A Hypothesis strategy of ``family`` cases drawn around :data:`RECIPES` (``w32_only`` is accepted for the
    pytest gate's ESPnet subjects: every recipe's weights are float32 already)."""
    from hypothesis import currently_in_test_context, note
    from hypothesis import strategies as st

    _check(family, scale)
    draw_one = _draw_one(family, scale)

    @st.composite
    def draw_case(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Case:
        case = draw_one(HypothesisSource(draw))
        if currently_in_test_context():
            note(f"{case!r}: {case.to_json()}")
        return case

    return draw_case()


def recipe_corpus(family: str, *, examples: int, seed: int, scale: str = "slice") -> list[Case]:
    """``examples`` distinct cases of ``family`` drawn around the table, the same list for the same arguments:
    the configurations in turn (every one of the family once ``examples`` reaches their number), each case's
    sizes drawn within its row."""
    from harness.generate.sampler import sample_distinct, seeded_random  # the sampler's builders read this table

    _check(family, scale)
    rows = recipes_for(family)
    src = RandomSource(seeded_random("recipe", family, seed))
    turn = iter(range(10**9))
    return sample_distinct(lambda s: draw_recipe_case(s, rows[next(turn) % len(rows)], family, scale), src, examples)


def full_case(recipe: Recipe, family: str) -> Case:
    """The configuration's largest corner as a case of ``family``: its whole batch, every sequence as long as
    the longest, its widest layer (what ``cases --coverage`` prices against the device's memory)."""
    f = recipe.full()
    tags = (f"recipe:{recipe.name}", f"convention:{recipe.convention}", "scale:full")
    if family == "lstm":
        return Case("lstm", 0, {"in_size": f["in_size"], "hidden": f["hidden"], "n_layers": f["layers"],
                                "lengths": [f["max_len"]] * f["batch"], "bidirectional": recipe.bidirectional},
                    tags=tags)
    vocab = f["vocab"]
    padding = _padding(recipe.convention, vocab)
    if family == "embed":
        return Case("embed", 0, {"vocab": vocab, "width": f["hidden"], "ids_shape": [f["batch"], f["max_len"]],
                                 "row_lengths": [f["max_len"]] * f["batch"], **padding}, tags=tags)
    return Case("pipeline", 0, {"vocab": vocab, "width": f["hidden"], "hidden": f["hidden"], "n_layers": f["layers"],
                                "lengths": [f["max_len"]] * f["batch"], **padding}, tags=tags)


# ---- the dimensions a recipe runs at, one at a time ------------------------------------------------------------
@dataclass(frozen=True)
class Dimension:
    """One size of one family: the largest value a configuration of :data:`RECIPES` runs at (``maximum``, read
    off the table by ``largest``), and the boundaries where what runs changes
    (:data:`harness.generate.dimensions.BOUNDARIES`). A case crosses a boundary where its value is at least the
    boundary's; each boundary is an edge kind (:func:`harness.generate.dimensions.dimension_kinds`), so a contract
    can name it and the strategies draw around it."""

    family: str
    name: str
    what: str
    largest: Callable[[Recipe], int]

    @property
    def boundaries(self) -> tuple[int, ...]:
        return BOUNDARIES[(self.family, self.name)]

    @property
    def maximum(self) -> int:
        """The recipes' largest value of this dimension (0 where no configuration of the family sets it)."""
        return max((self.largest(r) for r in recipes_for(self.family)), default=0)

    @property
    def top(self) -> int:
        """The largest boundary at or below :attr:`maximum`: the one a real model crosses last."""
        return max((b for b in self.boundaries if b <= self.maximum), default=0)

    def kind(self, boundary: int) -> str:
        """The edge kind of crossing ``boundary`` (``lstm.steps>=512``)."""
        return dimension_kind(self.family, self.name, boundary)


def _pileup_max(r: Recipe) -> int:
    """The most padding ids one row of a full batch receives: ESPnet pads with eos (row V-1), every sequence
    but the longest as short as :data:`_SPREAD` of it; Chainer's padding is ignored (-1), so it piles nowhere."""
    if r.convention != "espnet":
        return 0
    longest = r.max_len[1]
    return (r.batch[1] - 1) * (longest - max(1, int(longest * _SPREAD)))


#: Every dimension of every family with its recipe maximum (its boundaries:
#: :data:`harness.generate.dimensions.BOUNDARIES`): the one table the default corpus's corner cases
#: (:func:`corner_cases`) and ``cases --coverage`` read.
DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("embed", "ids", "ids in one embedding batch (its backward's reduction depth)",
              lambda r: r.batch[1] * r.max_len[1]),
    Dimension("embed", "vocab", "rows of the embedding table", lambda r: r.vocab[1]),
    Dimension("embed", "width", "the embedding's width (columns a row's gradient adds)",
              lambda r: r.hidden[1]),
    Dimension("embed", "pileup", "ids one row receives (the eos padding of a sorted batch)", _pileup_max),
    Dimension("lstm", "steps", "steps the longest sequence runs", lambda r: r.max_len[1]),
    Dimension("lstm", "hidden", "hidden units", lambda r: r.hidden[1]),
    Dimension("lstm", "layers", "stacked layers of one call", lambda r: r.layers[1]),
    Dimension("lstm", "batch", "sequences in one batch", lambda r: r.batch[1]),
    Dimension("lstm", "in_size", "the input's width (the first layer's GEMM depth)",
              lambda r: max(r.in_size, default=0)),
    Dimension("pipeline", "ids", "padded ids in one batch", lambda r: r.batch[1] * r.max_len[1]),
    Dimension("pipeline", "pileup", "ids one row receives (the eos padding of a sorted batch)",
              _pileup_max),
    Dimension("pipeline", "steps", "steps the longest sequence runs", lambda r: r.max_len[1]),
    Dimension("pipeline", "hidden", "hidden units", lambda r: r.hidden[1]),
    Dimension("pipeline", "layers", "stacked layers of one call", lambda r: r.layers[1]),
    Dimension("pipeline", "batch", "sequences in one batch", lambda r: r.batch[1]),
    Dimension("pipeline", "vocab", "rows of the embedding table", lambda r: r.vocab[1]),
    Dimension("pipeline", "width", "the embedding's width (the LSTM's input)", lambda r: r.hidden[1]),
)


#: The small sizes every other dimension of a corner case keeps (a few steps, a few units, a 50-row table).
_SMALL_RNN = {"n_layers": 1, "in_size": 3, "hidden": 4, "lengths": [3, 2]}
_SMALL_VOCAB = 50


def _espnet_ids(vocab: int) -> dict[str, int]:
    return {"pad_id": vocab - 1, "sos_id": vocab - 1}


def _sorted_rows(longest: int, batch: int) -> list[int]:
    """A full recipe batch's lengths at its widest spread: the longest, then every other as short as ESPnet's
    sorted minibatches allow (:data:`_SPREAD`), so the eos padding piles up as far as a real batch's does."""
    return [longest] + [max(1, int(longest * _SPREAD))] * (batch - 1)


def _corner(d: Dimension) -> tuple[str, dict[str, Any]]:
    """The family and spec of the case at ``d``'s recipe maximum with every other dimension small."""
    top = d.maximum
    if d.family == "embed":
        spec: dict[str, Any] = {"vocab": _SMALL_VOCAB, "width": 4, "ids_shape": [3, 8], "row_lengths": [8, 6, 4]}
        if d.name in ("ids", "pileup"):  # the char LM's whole batch: its ids and its eos padding at once
            full = max(recipes_for("embed"), key=d.largest)
            rows = _sorted_rows(full.max_len[1], full.batch[1])
            spec.update(ids_shape=[len(rows), rows[0]], row_lengths=rows)
        else:
            spec[d.name] = top
        spec.update(_espnet_ids(int(spec["vocab"])))
        return "embed", spec
    spec = {**_SMALL_RNN}
    if d.family == "pipeline":
        spec = {**spec, "vocab": _SMALL_VOCAB, "width": 4}
        spec.pop("in_size")
    if d.name == "steps":  # one sequence: each step of a batch costs Chainer the same whatever its rows
        spec["lengths"] = [top]
    elif d.name == "batch":
        spec["lengths"] = [3] + [2] * (top - 1)
    elif d.name in ("ids", "pileup"):
        full = max(recipes_for(d.family), key=d.largest)
        spec["lengths"] = _sorted_rows(full.max_len[1], full.batch[1])
    else:
        spec[d.name if d.name != "layers" else "n_layers"] = top
    if d.family == "pipeline":
        spec.update(_espnet_ids(int(spec["vocab"])))
    return d.family, spec


def corner_cases() -> list[Case]:
    """One case per dimension of :data:`DIMENSIONS` at its recipe maximum, every other dimension small, so that
    each costs what its one size costs (800 steps at hidden 4; hidden 1,024 over 3 steps; the char LM's 1,024 x
    151 eos-padded ids at width 4), tagged ``corner:<family>.<dimension>``. Where one real batch ties sizes
    together (the ids, their padding, the sequences and steps that hold them) one case reaches them all and
    carries each one's tag."""
    made: list[tuple[tuple[str, dict[str, Any]], list[str]]] = []  # each spec, and the dimensions it is made for
    for d in DIMENSIONS:
        # a dimension an earlier corner already takes to its maximum (the char LM's whole batch holds the
        # pipeline's longest sequence and its largest batch) gets no case of its own: one case costs less
        mine = next((names for (family, spec), names in made if family == d.family
                     and dimension_value(Case(family, 70, spec), d.name) >= d.maximum), None)
        if mine is None:
            made.append((_corner(d), mine := []))
        mine.append(f"corner:{d.family}.{d.name}")
    out = []
    for (family, spec), names in made:
        sort = ("lengths:sorted",) if family != "embed" else ()
        out.append(with_edge_tags(Case(family, 70, spec, tags=("corner", *names, *sort))))
    return out


#: The most one run of a full-length case may hold at its peak (:func:`harness.core.cost.estimate`): its batch
#: is cut to fit, never its length.
SLICE_PEAK = 8 << 30


def full_length_cases() -> list[Case]:
    """The ``realistic`` profile's LSTM cases at each encoder configuration's longest sequence (its
    ``maxlen-in`` after subsampling: 800 steps for blstmp, 400 for blstm), at the row's smallest hidden size and
    one layer, the other sequences as short as a sorted batch allows: a slice of :data:`SLICE_BATCH`
    sequences, fewer where the memory estimate says that slice would not fit in :data:`SLICE_PEAK` (tagged
    ``slice:batch``). The length is never cut: what breaks past 512 steps shows only there."""
    from harness.core.cost import estimate

    out = []
    for r in recipes_for("lstm"):
        batch = min(SLICE_BATCH, r.batch[1])
        while True:
            spec = {"in_size": r.in_size[0], "hidden": r.hidden[0], "n_layers": min(r.layers[0], SLICE_LAYERS),
                    "lengths": _sorted_rows(r.max_len[1], batch), "bidirectional": r.bidirectional}
            case = Case("lstm", 80, spec, tags=(f"recipe:{r.name}", f"convention:{r.convention}", "scale:slice",
                                                "full-length", "lengths:sorted", "slice:batch"))
            if batch == 1 or estimate(case).peak <= SLICE_PEAK:
                break
            batch -= 1
        out.append(with_edge_tags(case))
    return out
