"""A chime dev for the SDK's tests, and a callback receiver, both on 127.0.0.1."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, cond, timeout: float = 60.0, every: float = 0.1):
    """Poll cond until it returns something truthy, or fail after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - polled until the deadline
            last = e
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")


class ChimeDev:
    def __init__(self, state_dir: Path, base_url: str, token: str, proc: subprocess.Popen):
        self.state_dir, self.base_url, self.admin_token, self.proc = state_dir, base_url, token, proc


@pytest.fixture(scope="session")
def chime_dev():
    binary = os.environ.get("CHIME_BIN") or str(REPO / "bin" / "chime")
    if not Path(binary).exists():
        pytest.fail(f"no chime binary at {binary}: run `make build`, or `make test-sdk`")
    state = Path(tempfile.mkdtemp(prefix="chime-sdk-"))
    port = free_port()
    token = secrets.token_hex(16)
    env = {**os.environ, "CHIME_ADMIN_TOKEN": token, "CHIME_PARTITIONS": "6", "CHIME_LOG_LEVEL": "warn"}
    log = open(state / "chime.log", "wb")
    proc = subprocess.Popen([binary, "dev", "-state-dir", str(state), "-addr", f"127.0.0.1:{port}"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for("chime dev ready", lambda: proc.poll() is None and httpx.get(base + "/readyz", timeout=2).status_code == 200,
                 timeout=180)
    except AssertionError:
        proc.kill()
        raise AssertionError("chime dev did not start:\n" + (state / "chime.log").read_text()[-4000:])
    yield ChimeDev(state, base, token, proc)
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    # The state dir holds a broker's and ClickHouse's data (tens of MB): a
    # test run must not leave it behind on a shared disk.
    shutil.rmtree(state, ignore_errors=True)


class Received:
    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes):
        self.method, self.path, self.headers, self.body = method, path, headers, body


class Receiver:
    """Records every request; answers the status set for its path (200 by default)."""

    def __init__(self):
        self.calls: list[Received] = []
        self.status: dict[str, int] = {}
        self.delay: dict[str, float] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.lock:
                    outer.calls.append(Received("POST", self.path, dict(self.headers.items()), body))
                    status = outer.status.get(self.path, 200)
                    delay = outer.delay.get(self.path, 0.0)
                if delay:
                    time.sleep(delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def calls_to(self, path: str) -> list[Received]:
        with self.lock:
            return [c for c in self.calls if c.path == path]


@pytest.fixture(scope="session")
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()
