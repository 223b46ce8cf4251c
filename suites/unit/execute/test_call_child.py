"""A named call names a module-level function of the harness, and nothing else."""

from __future__ import annotations

import json

import pytest

from harness.execute.call_child import name_of
from harness.execute.localization import localize_request


def test_a_module_level_function_of_the_harness_is_named_by_module_and_name():
    assert name_of(localize_request) == "harness.execute.localization:localize_request"


def test_a_function_outside_the_harness_or_nested_has_no_name():
    def nested(request):
        return request

    for fn in (nested, json.dumps):
        with pytest.raises(ValueError, match="not a module-level function of the harness"):
            name_of(fn)
