"""The OpenAPI 3.1 document served at ``/openapi.json``, generated from the route table so it
cannot drift from what the server dispatches. Schemas are Kafka Connect's entities."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol


class DocumentedRoute(Protocol):
    """What the document needs of a route (``worker.rest.app.Route`` has it): declared here
    so that this module does not import the app that serves it."""

    @property
    def method(self) -> str: ...
    @property
    def template(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def responses(self) -> tuple[int, ...]: ...
    @property
    def request(self) -> str | None: ...
    @property
    def response(self) -> str | None: ...
    @property
    def query(self) -> tuple[str, ...]: ...
    @property
    def tag(self) -> str: ...


STATE = {
    "type": "string",
    "enum": ["UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING"],
}
STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def _obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required)}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS: dict[str, Any] = {
    "ErrorMessage": _obj(
        {"error_code": {"type": "integer"}, "message": {"type": "string"}},
        ("error_code", "message"),
    ),
    "Message": _obj({"message": {"type": "string"}}, ("message",)),
    "ServerInfo": _obj(
        {
            "version": {"type": "string"},
            "commit": {"type": "string"},
            "kafka_cluster_id": {"type": "string"},
        }
    ),
    "WorkerStatus": _obj(
        {
            "status": {"type": "string", "enum": ["healthy", "starting", "unhealthy"]},
            "message": {"type": "string"},
        }
    ),
    "ConnectorConfig": STR_MAP,
    "ConnectorConfigPatch": {
        "type": "object",
        "additionalProperties": {"type": ["string", "null"]},
    },
    "ConnectorTaskId": _obj(
        {"connector": {"type": "string"}, "task": {"type": "integer"}}, ("connector", "task")
    ),
    "CreateConnectorRequest": _obj(
        {
            "name": {"type": "string"},
            "config": _ref("ConnectorConfig"),
            "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]},
        },
        ("name", "config"),
    ),
    "ConnectorInfo": _obj(
        {
            "name": {"type": "string"},
            "config": _ref("ConnectorConfig"),
            "tasks": {"type": "array", "items": _ref("ConnectorTaskId")},
            "type": {"type": "string", "enum": ["source", "sink", "unknown"]},
        },
        ("name", "config", "tasks", "type"),
    ),
    "TaskState": _obj(
        {
            "id": {"type": "integer"},
            "state": STATE,
            "worker_id": {"type": "string"},
            "trace": {"type": "string"},
        },
        ("id", "state", "worker_id"),
    ),
    "ConnectorStateInfo": _obj(
        {
            "name": {"type": "string"},
            "connector": _obj(
                {"state": STATE, "worker_id": {"type": "string"}, "trace": {"type": "string"}},
                ("state", "worker_id"),
            ),
            "tasks": {"type": "array", "items": _ref("TaskState")},
            "type": {"type": "string"},
        },
        ("name", "connector", "tasks", "type"),
    ),
    "ConnectorList": {
        "oneOf": [
            {"type": "array", "items": {"type": "string"}},
            {
                "type": "object",
                "additionalProperties": _obj(
                    {"status": _ref("ConnectorStateInfo"), "info": _ref("ConnectorInfo")}
                ),
            },
        ]
    },
    "TaskInfos": {
        "type": "array",
        "items": _obj({"id": _ref("ConnectorTaskId"), "config": STR_MAP}, ("id", "config")),
    },
    "ConnectorOffsets": _obj(
        {
            "offsets": {
                "type": "array",
                "items": _obj(
                    {"partition": {"type": "object"}, "offset": {"type": ["object", "null"]}},
                    ("partition", "offset"),
                ),
            }
        },
        ("offsets",),
    ),
    "PluginInfos": {
        "type": "array",
        "items": _obj(
            {"class": {"type": "string"}, "type": {"type": "string"}, "version": {"type": "string"}}
        ),
    },
    "ConfigInfos": _obj(
        {
            "name": {"type": "string"},
            "error_count": {"type": "integer"},
            "groups": {"type": "array", "items": {"type": "string"}},
            "configs": {
                "type": "array",
                "items": _obj({"definition": {"type": "object"}, "value": {"type": "object"}}),
            },
        },
        ("name", "error_count", "groups", "configs"),
    ),
}

DESCRIPTIONS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No content",
    400: "Bad request",
    403: "Forbidden",
    404: "Not found",
    409: "Conflict",
    500: "Internal error or unhealthy",
    503: "Starting",
}


def _slug(template: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "_", template).strip("_") or "root"


def document(routes: Sequence[DocumentedRoute], version: str) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for r in routes:
        params: list[dict[str, Any]] = [
            {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
            for n in re.findall(r"\{(\w+)\}", r.template)
        ]
        params += [
            {"name": q, "in": "query", "required": False, "schema": {"type": "string"}}
            for q in r.query
        ]
        responses: dict[str, Any] = {}
        for code in r.responses:
            entry: dict[str, Any] = {"description": DESCRIPTIONS.get(code, str(code))}
            if code >= 400:
                entry["content"] = {"application/json": {"schema": _ref("ErrorMessage")}}
            elif code in (200, 201, 202) and r.response:
                entry["content"] = {"application/json": {"schema": _ref(r.response)}}
            responses[str(code)] = entry
        op: dict[str, Any] = {
            "summary": r.summary,
            "tags": [r.tag],
            "operationId": f"{r.method.lower()}_{_slug(r.template)}",
            "parameters": params,
            "responses": responses,
        }
        if r.request:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": _ref(r.request)}},
            }
        paths.setdefault(r.template, {})[r.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tidemark worker (Kafka Connect REST API)",
            "version": version,
            "description": "Kafka Connect's REST API as served by the tidemark worker; see "
            "docs/worker.md for the differences.",
        },
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
