"""harness/generate/model_cases.py: a model case names its recipe and scale, takes overrides, and refuses an
unknown recipe or scale in one line."""

from __future__ import annotations

import pytest

from harness.core.errors import InvalidArgument
from harness.core.schemas import MODEL_RECIPES
from harness.generate.model_cases import MODEL_SCALES, model_case, model_spec


@pytest.mark.parametrize("recipe", MODEL_RECIPES)
def test_every_recipe_at_every_scale_is_a_model_case_tagged_with_it(recipe: str) -> None:
    for scale in MODEL_SCALES:
        case = model_case(recipe, scale, seed=2)
        assert case.family == "model" and case.spec["recipe"] == recipe and f"scale:{scale}" in case.tags
        assert any(t.startswith("recipe:") for t in case.tags)


def test_overrides_go_on_top_and_the_scales_differ() -> None:
    assert model_spec("espnet_rnnlm", steps=3)["steps"] == 3
    assert model_spec("espnet_rnnlm", "ci") != model_spec("espnet_rnnlm", "slice")


@pytest.mark.parametrize("args, needle", [(("nope",), "recipe='nope'"), (("espnet_rnnlm", "huge"), "scale='huge'")])
def test_an_unknown_recipe_or_scale_is_refused(args: tuple, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        model_spec(*args)
