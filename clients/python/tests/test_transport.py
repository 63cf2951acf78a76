"""What the client sends and how it reads answers that are not mcq's:
against a small real HTTP server in this process, and against a port that
nothing listens on."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcq_client import Client, McqError, ProblemError, UnreachableError


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request with the status, type and body set on the
    server, and records the request's headers."""

    def _answer(self) -> None:
        server = self.server
        assert isinstance(server, _RecordingServer)
        server.seen.append((self.command, self.path, dict(self.headers)))
        length = int(self.headers.get("Content-Length") or 0)
        server.bodies.append(self.rfile.read(length))
        body = server.body
        self.send_response(server.status)
        self.send_header("Content-Type", server.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


class _RecordingServer(ThreadingHTTPServer):
    status = 200
    content_type = "application/json"
    body = b"{}"

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[bytes] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@pytest.fixture
def recorder() -> Iterator[_RecordingServer]:
    server = _RecordingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_api_key_is_sent_as_a_bearer_token(recorder: _RecordingServer) -> None:
    recorder.body = json.dumps({"id": "b", "job_ids": ["j"]}).encode()
    with Client(recorder.url + "/", api_key="secret-key") as mcq:
        batch = mcq.submit_batch([{"seed": 2**64 - 1}], label="x")
    assert (batch.id, batch.job_ids) == ("b", ["j"])
    method, path, headers = recorder.seen[0]
    assert (method, path) == ("POST", "/v1/batches")
    assert headers["Authorization"] == "Bearer secret-key"
    assert headers["Content-Type"] == "application/json"
    assert "Idempotency-Key" not in headers
    # The seed leaves as its exact digits, not as a float.
    assert b'"seed": 18446744073709551615' in recorder.bodies[0]


def test_no_key_no_authorization_header(recorder: _RecordingServer) -> None:
    recorder.body = json.dumps({"id": "b", "job_ids": []}).encode()
    with Client(recorder.url) as mcq:
        mcq.submit_batch([], idempotency_key="k-1")
    headers = recorder.seen[0][2]
    assert "Authorization" not in headers
    assert headers["Idempotency-Key"] == "k-1"


def test_an_error_page_that_is_not_a_problem_is_still_a_problem_error(
    recorder: _RecordingServer,
) -> None:
    recorder.status = 502
    recorder.content_type = "text/html"
    recorder.body = b"<html><body>Bad gateway</body></html>"
    with Client(recorder.url) as mcq, pytest.raises(ProblemError) as caught:
        mcq.job("0193")
    assert caught.value.status == 502
    assert caught.value.type == "about:blank"
    assert "Bad gateway" in caught.value.detail
    assert caught.value.errors == []


def test_a_success_that_is_not_json_is_an_error(recorder: _RecordingServer) -> None:
    recorder.content_type = "text/plain"
    recorder.body = b"hello"
    with Client(recorder.url) as mcq, pytest.raises(McqError, match="not JSON"):
        mcq.job("0193")


def test_values_json_cannot_hold_are_refused_before_sending(recorder: _RecordingServer) -> None:
    with Client(recorder.url) as mcq, pytest.raises(ValueError, match="JSON"):
        mcq.submit(up=float("nan"))
    assert recorder.seen == []


def test_an_unreachable_server_is_its_own_error() -> None:
    # A port that was free a moment ago: nothing listens on it.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", timeout=5) as mcq:
        with pytest.raises(UnreachableError) as caught:
            mcq.submit()
        assert isinstance(caught.value, ConnectionError)
        assert not isinstance(caught.value, ProblemError)
        with pytest.raises(UnreachableError):
            mcq.wait("0193", timeout=1)
