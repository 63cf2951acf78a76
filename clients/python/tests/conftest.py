"""Real servers for the client's tests.

Each test that takes ``client`` runs twice: against ``mcq serve`` on a
fresh SQLite file, and against ``mcq serve`` on a throwaway PostgreSQL
cluster (started with the repository's ``deploy/pg-local.sh`` on a free
port, removed afterwards). Both servers run two embedded workers and hold
a long poll at most 2.25 s, so that waits loop past the server's cap.

Nothing is built here: the binary is ``$MCQ_BIN``, by default the
repository's ``target/debug/mcq`` (``cargo build -p mcq``). When
PostgreSQL cannot be started its tests are skipped with a loud message,
except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from mcq_client import Client

REPO = Path(__file__).resolve().parents[3]
LISTENING = "mcq listening on "
START_SECONDS = 60.0
# The servers hold a long poll at most three quarters of this (2.25 s), so
# any longer wait must ask again past the server's cap, as in production
# past 22.5 s.
REQUEST_TIMEOUT_SECS = 3


@dataclass
class Server:
    """A running ``mcq serve``."""

    url: str
    backend: str
    process: subprocess.Popen[bytes]
    log: Path
    hold_cap_seconds: float = REQUEST_TIMEOUT_SECS * 3 / 4
    """The longest the server holds one long poll."""


def _in_ci() -> bool:
    return os.environ.get("CI", "") in ("true", "1")


def _mcq_bin() -> Path:
    path = Path(os.environ.get("MCQ_BIN") or REPO / "target" / "debug" / "mcq")
    if not path.is_file():
        pytest.fail(
            f"no mcq binary at {path}: build it with `cargo build -p mcq` or point MCQ_BIN at one",
            pytrace=False,
        )
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def postgres_url(pytestconfig: pytest.Config) -> Iterator[str]:
    """The URL of a database in a throwaway PostgreSQL cluster."""
    script = REPO / "deploy" / "pg-local.sh"
    # Directly under /tmp: as root the server runs as `postgres`, which must
    # be able to reach the directory (pytest's temp dirs are private to root).
    pg_dir = Path(tempfile.gettempdir()) / f"mcq-pyclient-pg-{os.getpid()}"
    env = {**os.environ, "MCQ_PG_DIR": str(pg_dir), "MCQ_PG_PORT": str(_free_port())}
    started = subprocess.run(
        ["bash", str(script), "start"], env=env, capture_output=True, text=True, timeout=120
    )
    if started.returncode != 0:
        subprocess.run(["bash", str(script), "destroy"], env=env, capture_output=True)
        reason = (
            f"PostgreSQL could not be started with {script}: "
            f"{(started.stderr or started.stdout).strip()}"
        )
        if _in_ci():
            pytest.fail(f"PostgreSQL is required under CI but unavailable. {reason}", pytrace=False)
        banner = "*" * 70
        message = f"\n{banner}\n*** SKIPPING the PostgreSQL tests: {reason}\n{banner}"
        # Past pytest's output capture, so the skip cannot go unnoticed.
        capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
        if capture is not None:
            with capture.global_and_fixture_disabled():
                print(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr)
        pytest.skip(f"SKIPPING PostgreSQL tests: {reason}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(script), "destroy"], env=env, capture_output=True)


def make_key(database_url: str, tenant: str, role: str = "submit") -> str:
    """A new API key for ``tenant``, made with ``mcq keys create``."""
    made = subprocess.run(
        [
            str(_mcq_bin()),
            "keys",
            "create",
            "--tenant",
            tenant,
            "--role",
            role,
            "--quiet",
            "--database-url",
            database_url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return made.stdout.strip()


def _start(database_url: str, backend: str, workdir: Path) -> Server:
    log = workdir / "server.log"
    out = workdir / "server.out"
    with open(out, "wb") as stdout, open(log, "wb") as stderr:
        process = subprocess.Popen(
            [
                str(_mcq_bin()),
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                database_url,
                "--embedded-workers",
                "2",
                "--request-timeout-secs",
                str(REQUEST_TIMEOUT_SECS),
            ],
            cwd=workdir,
            stdout=stdout,
            stderr=stderr,
        )
    deadline = time.monotonic() + START_SECONDS
    url = None
    while time.monotonic() < deadline and process.poll() is None:
        text = out.read_text()
        if LISTENING in text:
            url = text.split(LISTENING, 1)[1].split()[0]
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    return Server(url=url, backend=backend, process=process, log=log)
            except httpx.TransportError:
                pass
        time.sleep(0.05)
    _stop(process)
    pytest.fail(
        f"mcq serve ({backend}) did not become healthy (url {url}, exit {process.returncode}):\n"
        f"{_tail(log)}",
        pytrace=False,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """``mcq serve`` on each backend, shared by the tests of a session."""
    backend: str = request.param
    workdir = tmp_path_factory.mktemp(f"serve-{backend}")
    if backend == "sqlite":
        database_url = f"sqlite:{workdir / 'mcq.sqlite'}"
    else:
        database_url = request.getfixturevalue("postgres_url")
    running = _start(database_url, backend, workdir)
    try:
        yield running
    finally:
        _stop(running.process)
        if running.process.returncode not in (0, None):
            print(
                f"mcq serve ({backend}) exited {running.process.returncode}:\n{_tail(running.log)}"
            )
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    """A client of the backend's server."""
    with Client(server.url) as mcq:
        yield mcq


@dataclass
class KeyedServer:
    """A running ``mcq serve`` whose database holds keys."""

    server: Server
    alice: str
    """A ``submit`` key of tenant ``alice``."""
    bob: str
    """A ``submit`` key of tenant ``bob``."""


@pytest.fixture(scope="session")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    """``mcq serve`` on SQLite with two tenants' keys made beforehand."""
    workdir = tmp_path_factory.mktemp("serve-keyed")
    database_url = f"sqlite:{workdir / 'mcq.sqlite'}"
    alice = make_key(database_url, "alice")
    bob = make_key(database_url, "bob")
    running = _start(database_url, "sqlite", workdir)
    try:
        yield KeyedServer(server=running, alice=alice, bob=bob)
    finally:
        _stop(running.process)
        shutil.rmtree(workdir, ignore_errors=True)
