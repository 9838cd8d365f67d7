"""schemathesis against the app's own OpenAPI schema: no 5xx and no answer that breaks the schema.

Bounded and repeatable: a fixed number of examples per operation, derandomized, no deadline. The
app runs in-process on the real Postgres, Redis and S3, with tenant A's key and no worker. Host
names in generated URLs resolve nowhere, so no request leaves the machine.
"""

from __future__ import annotations

import socket
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import positive_data_acceptance

from api.app import create_app
from tests.conftest import KEY_A, make_settings
from tests.support.no_dns import literal_addresses_only

EXAMPLES_PER_OPERATION = 25
# A schema-valid submission may still be refused: a page range past the document's end, a file that is no
# image, a URL that resolves nowhere. Those 4xx are correct answers, not findings.
CHECKS_OFF = [positive_data_acceptance]
# Routes that answer with the result once a worker has read the document; none runs here, so a document they
# accept ends in their 504 (docling-serve's own answer for a conversion past its wait), after OCRQ_SYNC_WAIT_S.
WAIT_FOR_A_WORKER = {"POST /v1/convert/file", "POST /v1/convert/source", "PUT /process"}


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory, pg_url, redis_url, s3):
    # No rate limit: the fuzzer's request rate is not what is under test here.
    app_settings = make_settings(home=tmp_path_factory.mktemp("fuzz"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                                 storage_url="s3://ocrq-test/fuzz", rate_limit_rps=0, sync_wait_s=0.2)
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(app_settings))


@pytest.fixture()
def no_dns(monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", literal_addresses_only)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_api_answers_within_its_schema(api_schema, no_dns, mode):
    # One hypothesis run per operation (schemathesis' pytest plugin does not load under pytest 9).
    failures, calls = {}, Counter()
    for operation in (result.ok() for result in api_schema.get_all_operations()):
        # Named as the module's list, which `call` reads: hypothesis seeds each run from call's source
        # (derandomize), so its text stays as it was; a change of the schema still moves the examples.
        NOT_APPLICABLE = CHECKS_OFF + ([not_a_server_error] if operation.label in WAIT_FOR_A_WORKER else [])

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def call(case):
            calls[(case.operation.label, case.media_type)] += 1
            case.call_and_validate(headers={"Authorization": f"Bearer {KEY_A}"}, excluded_checks=NOT_APPLICABLE)

        try:
            call()
        except Unsatisfiable:  # nothing in this operation can be made invalid (no parameters, or free strings)
            assert mode is GenerationMode.NEGATIVE, operation.label
        except Exception as exc:  # every operation is tried; all failures are reported together
            failures[operation.label] = exc
    assert not failures, "\n\n".join(f"{label}:\n{exc}" for label, exc in failures.items())
    print(f"\nschemathesis {mode.value}: {sum(calls.values())} calls", dict(calls))
    if mode is GenerationMode.POSITIVE:  # both forms of POST /jobs, and a keyed route, were really sent
        assert calls[("POST /jobs", "multipart/form-data")] and calls[("POST /jobs", "application/json")], calls
        assert calls[("GET /jobs/{job_id}", None)] and calls[("POST /batches", "application/json")], calls


def test_the_schema_is_valid_openapi_and_every_reference_resolves(api_schema):
    from openapi_spec_validator import validate

    document = api_schema.raw_schema
    validate(document)
    refs = set()

    def walk(node):
        if isinstance(node, dict):
            refs.update([node["$ref"]] if isinstance(node.get("$ref"), str) else [])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert "#/components/schemas/JobFromSource" in refs
    for ref in refs:
        target = document
        for part in ref.removeprefix("#/").split("/"):
            assert part in target, f"{ref} does not resolve"
            target = target[part]
