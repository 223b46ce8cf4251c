"""The input schemas (harness/core/schemas.py) are valid Draft 2020-12 schemas: checked here, once, so that no
process of the harness pays for the meta-schema check at start-up."""

from __future__ import annotations

import jsonschema
import pytest

from harness.core import schemas

SCHEMAS = {"CASE": schemas.CASE, "CONTRACTS": schemas.CONTRACTS, "AUDIT": schemas.AUDIT,
           "ENVIRONMENT": schemas.ENVIRONMENT, "CAMPAIGN": schemas.CAMPAIGN,
           **{f"spec_schema({f!r})": schemas.spec_schema(f) for f in schemas.FAMILIES}}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_is_a_valid_draft_2020_12_schema(name):
    jsonschema.Draft202012Validator.check_schema(SCHEMAS[name])


def test_the_check_can_fail():
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema({"type": "integr"})
