"""The server's own description of its API (``GET /openapi.json``) has
every route the client calls, answering with the fields the client reads."""

from __future__ import annotations

from typing import Any

import httpx

from .conftest import Server

ROUTES = {
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs/{id}"),
    ("post", "/v1/jobs/{id}/cancel"),
    ("post", "/v1/batches"),
    ("get", "/v1/batches/{id}"),
    ("get", "/v1/batches/{id}/jobs"),
    ("post", "/v1/batches/{id}/cancel"),
}

# What the views read, by route and status (the schemas' names are the
# server's business). A submission answers 202; 200 is its dry run, which
# the client returns as the server's JSON.
FIELDS_READ = {
    ("get", "/v1/jobs/{id}", "200"): {
        "id",
        "batch_id",
        "state",
        "spec",
        "result",
        "error",
        "timings",
    },
    ("post", "/v1/batches", "202"): {"id", "job_ids"},
    ("get", "/v1/batches/{id}", "200"): {
        "id",
        "label",
        "total",
        "counts",
        "done",
        "stats",
        "timings",
    },
    ("get", "/v1/batches/{id}/jobs", "200"): {"jobs", "next"},
}


def _schema(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = document["components"]["schemas"][name]
    return schema


def test_every_route_the_client_calls_is_described(server: Server) -> None:
    document = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    described = {(method, path) for path, item in document["paths"].items() for method in item}
    assert ROUTES <= described, ROUTES - described
    for (method, path, status), fields in FIELDS_READ.items():
        ok = document["paths"][path][method]["responses"][status]
        schema = _schema(document, ok["content"]["application/json"]["schema"])
        assert fields <= set(schema["properties"]), (path, fields - set(schema["properties"]))
