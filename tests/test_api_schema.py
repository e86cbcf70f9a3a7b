"""Property-based tests of the whole REST surface from its own OpenAPI document (schemathesis).

Every operation gets generated requests, each sent with an admin token, a narrowed token and an
invalid one. No response may be a server error, and every response must match the document:
a documented status, content type, headers and body schema. Examples are bounded so the run
stays well under a minute.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memdir import OWNER, MemoryService
from test_api import Env, make_env

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
#: Operations that would take the shared store away from every later example.
EXAMPLES = 6  # per operation, valid and invalid requests mixed
KEEP_STORE = {("DELETE", "/v1/stores/{store}"), ("POST", "/v1/stores/{store}/archive")}


@pytest.fixture
def schema_env(svc: MemoryService) -> Env:
    env = make_env(svc)
    for path, text in (("/org/readme.md", "# Org\nbe kind\n"), ("/projects/acme/a.md", "a\n")):
        svc.write(OWNER, "default", path, text)
    return env


def test_every_operation_conforms_for_every_kind_of_token(schema_env: Env) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", schema_env.app)
    tokens = (schema_env.admin, schema_env.reader, "mdr_invalid")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30
    for operation in operations:
        valid = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
        invalid = operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)

        @given(case=valid | invalid)
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],  # no shrinking: report the first failure
        )
        def check(case: Any) -> None:
            params = case.path_parameters or {}
            if "store" in params and (case.method, case.path) not in KEEP_STORE:
                params["store"] = "default"  # an unknown store only ever answers 404
            if isinstance(case.query, dict) and "wait" in case.query:
                case.query["wait"] = 0  # long polls are tested in test_api.py
            stream = case.path.endswith("/changes/stream")  # endless: read what comes in 0.3 s
            for token in tokens:
                response = case.call_and_validate(
                    headers={"Authorization": f"Bearer {token}"}, checks=CHECKS,
                    **({"timeout": 0.3} if stream else {}),
                )  # fmt: skip
                if token == "mdr_invalid":
                    assert response.status_code in (400, 401, 404, 405), response.text

        check()
