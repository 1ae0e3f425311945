"""Fake servers on 127.0.0.1, each on an ephemeral port, started and stopped per test."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest
import uvicorn

from tests.probing.fake_server import FakeConfig, make_app

STARTUP_S = 15.0


@contextmanager
def running(config: FakeConfig):
    """Serve a fake server in a thread; yield its base URL (``http://127.0.0.1:PORT/v1``)."""
    server = uvicorn.Server(uvicorn.Config(make_app(config), host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError(f"the fake server did not start within {STARTUP_S:g} s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def fake_server():
    """A factory: ``with fake_server(perturb={"batch"}) as url: …``."""
    def start(perturb=(), lacks=(), **kwargs):
        return running(FakeConfig(perturb=frozenset(perturb), lacks=frozenset(lacks), **kwargs))
    return start
