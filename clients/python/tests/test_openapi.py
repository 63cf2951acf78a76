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

# What the views read, by route (the schemas' names are the server's business).
FIELDS_READ = {
    ("get", "/v1/jobs/{id}"): {"id", "batch_id", "state", "spec", "result", "error", "timings"},
    ("post", "/v1/batches"): {"id", "job_ids"},
    ("get", "/v1/batches/{id}"): {"id", "label", "total", "counts", "done", "stats", "timings"},
    ("get", "/v1/batches/{id}/jobs"): {"jobs", "next"},
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
    for (method, path), fields in FIELDS_READ.items():
        responses = document["paths"][path][method]["responses"]
        ok = next(v for k, v in responses.items() if k in ("200", "202"))
        schema = _schema(document, ok["content"]["application/json"]["schema"])
        assert fields <= set(schema["properties"]), (path, fields - set(schema["properties"]))
