"""The engine in a process of its own: a dead engine fails every open request and /health; stop ends it."""

import json
import os
import signal
import threading
import time

import httpx
import pytest

from tests.serving.conftest import running_server

LONG = {"prompt": [1, 2, 3], "max_tokens": 1000, "temperature": 0, "ignore_eos": True}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_killed_engine_fails_open_requests_and_health(model_dir):
    with running_server(model_dir) as served:
        url = served.base_url + "/v1/completions"
        pid = served.loop.info.pid
        assert pid != os.getpid()
        unary: dict = {}

        def post() -> None:
            unary["response"] = httpx.post(url, json=LONG, timeout=30)

        poster = threading.Thread(target=post)
        with httpx.stream("POST", url, json={**LONG, "stream": True}, timeout=30) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")  # the request runs in the engine
            poster.start()
            deadline = time.monotonic() + 10
            while served.loop.num_pending < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert served.loop.num_pending == 2
            os.kill(pid, signal.SIGKILL)
            rest = [line for line in lines if line]
        poster.join(30)
        assert rest[-1] == "data: [DONE]"
        assert json.loads(rest[-2].removeprefix("data: "))["choices"][0]["finish_reason"] == "error"
        response = unary["response"]
        assert response.status_code == 500
        assert "the engine process exited" in response.json()["error"]["message"]
        health = httpx.get(served.base_url + "/health", timeout=5)
        assert health.status_code == 503
        assert "the engine process exited" in health.json()["error"]["message"]
        refused = httpx.post(url, json={**LONG, "max_tokens": 2}, timeout=5)
        assert refused.status_code == 503
        assert served.loop.num_pending == 0


def test_stop_ends_the_engine_process(model_dir):
    with running_server(model_dir) as served:
        pid = served.loop.info.pid
        body = {**LONG, "max_tokens": 3}
        assert httpx.post(served.base_url + "/v1/completions", json=body, timeout=30).status_code == 200
        assert not _gone(pid)
    assert _gone(pid)
    assert not served.loop.is_healthy


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_engine_process_leaves_signals_to_the_server(model_dir, signum):
    # Ctrl-C reaches every process of the group: the engine must wait for the server's drain
    with running_server(model_dir) as served:
        os.kill(served.loop.info.pid, signum)
        time.sleep(0.5)
        assert served.loop.is_healthy
        body = {**LONG, "max_tokens": 3}
        assert httpx.post(served.base_url + "/v1/completions", json=body, timeout=30).status_code == 200
