"""Prolific's contract, its OpenAPI description (``publicapi.yaml``), as openapi-core reads it: the fake
Prolific (``fake_prolific.py``) checks every request it receives and every response it gives with
``Contract.request_problems`` and ``Contract.response_problems``.

openapi-core is a test dependency; the fake imports this module only when it is given a contract.
Two adaptations keep openapi-core 0.23 reading the contract as Prolific serves it; both are noted where
they happen (``_load`` and ``ContractRequest``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import yaml
from openapi_core import Config, OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from openapi_schema_validator import OAS30Validator
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.wrappers import Request, Response

PROLIFIC_HOST = "https://api.prolific.com/"


class Contract:
    """Prolific's OpenAPI description at ``path``, parsed once per process (it is 350 KB)."""

    def __init__(self, path: Path):
        self.path = path
        self.openapi, self.error_schema = _load(path.resolve())

    def request_problems(self, request: Request) -> list[str]:
        return [_describe(error) for error in self.openapi.iter_request_errors(ContractRequest(request))]

    def response_problems(self, request: Request, response: Response) -> list[str]:
        """Problems of an answer Prolific could not give; an error the operation does not declare must at
        least have the body of Prolific's ``Error`` schema."""
        found = self.openapi.iter_response_errors(ContractRequest(request), WerkzeugOpenAPIResponse(response))
        problems = [_describe(error) for error in found]
        undeclared = all("Unknown response http status" in problem for problem in problems)
        if problems and response.status_code >= 400 and undeclared:
            body = json.loads(response.get_data())
            problems = [error.message for error in self.error_schema.iter_errors(body)]
        return problems


@functools.cache
def _load(path: Path) -> tuple[OpenAPI, OAS30Validator]:
    """Adaptation 1: the participant-group list's ``filter`` parameter is a ``oneOf`` of two objects with no
    ``type``, so openapi-core cannot tell it is an object and never reads it as one. Saying ``type:
    object`` next to the ``oneOf`` adds nothing the ``oneOf`` does not already require. The file itself
    fails strict spec validation (a ``const`` under 3.0.1), hence ``spec_validator_cls=None``.
    """
    document = yaml.safe_load(path.read_text())
    document["components"]["schemas"]["GetParticipantGroupsRequestFilter"]["type"] = "object"
    error_schema = {"$ref": "#/components/schemas/Error", "components": document["components"]}
    return (OpenAPI.from_dict(document, config=Config(spec_validator_cls=None)), OAS30Validator(error_schema))


class ContractRequest(WerkzeugOpenAPIRequest):
    """A request as openapi-core should see it: addressed to Prolific's server, not to our local port.

    Adaptation 2: Prolific reads the participant-group list's ``filter`` object from plain query
    parameters (``?workspace_id=...``, form style, exploded), but openapi-core 0.23 looks for an exploded
    object under the parameter's own name as ``filter=workspace_id=...``; the query is presented so.
    """

    EXPLODED_OBJECTS = {"/api/v1/participant-groups/": ("filter", ("workspace_id", "project_id"))}

    def __init__(self, request: Request):
        super().__init__(request)
        exploded = self.EXPLODED_OBJECTS.get(request.path)
        if exploded is not None:
            name, keys = exploded
            query = request.args.to_dict(flat=False)
            packed = "&".join(f"{key}={value}" for key in keys for value in query.pop(key, []))
            if packed:
                query[name] = [packed]
            self.parameters.query = ImmutableMultiDict(
                [(key, value) for key, values in query.items() for value in values])

    @property
    def host_url(self) -> str:
        return PROLIFIC_HOST


def _describe(error: Exception) -> str:
    """openapi-core's finding, naming the field when a schema refused a value."""
    causes = getattr(error.__cause__, "schema_errors", None) or ()
    if not causes:
        return str(error)
    where = str(error).split(":")[0]
    return "; ".join(f"{where}: {'.'.join(map(str, cause.absolute_path)) or '(whole)'}: {cause.message}"
                     for cause in causes)
