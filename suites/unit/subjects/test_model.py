"""harness/subjects/model.py: one model subject per recipe, taking the model cases of its recipe only."""

from __future__ import annotations

from harness.core.schemas import MODEL_RECIPES
from harness.generate.model_cases import model_case
from harness.subjects.model import SUBJECTS, subject_for_recipe


def test_one_subject_per_recipe_taking_its_recipes_cases_only() -> None:
    by = {s.name: s for s in SUBJECTS}
    assert set(by) == {subject_for_recipe(r) for r in MODEL_RECIPES}
    for r in MODEL_RECIPES:
        case = model_case(r, "ci")
        takers = [name for name, s in by.items() if s.applies_to(case)]
        assert takers == [subject_for_recipe(r)]
        assert by[subject_for_recipe(r)].family == "model"
