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


def test_the_engine_process_freezes_what_is_alive_once_its_engine_is_built(monkeypatch):
    """A full collection over torch's objects would stall a decode step: the engine process
    leaves everything alive at start-up out of the collector's passes, after the engine is built."""
    import gc
    from types import SimpleNamespace

    from serving import engine_process

    monkeypatch.setattr(engine_process.signal, "signal", lambda *_: None)  # this process keeps its handlers
    seen: dict = {}

    def start_engine(status):
        seen["frozen_while_building"] = gc.get_freeze_count()
        engine = SimpleNamespace(spec=SimpleNamespace(vocab_size=8, eos_token_ids=[0]),
                                 config=SimpleNamespace(max_model_len=16),
                                 deployment=SimpleNamespace(digest="d", fields={}),
                                 runner=SimpleNamespace(plan=SimpleNamespace(digest="p")),
                                 has_unfinished=lambda: False)
        seen["engine"] = engine
        return engine, []

    class ParentGone:
        def poll(self, timeout):
            seen["frozen_while_serving"] = gc.get_freeze_count()
            raise EOFError

    sent = []
    gc.unfreeze()
    try:
        engine_process.engine_main(start_engine, ParentGone(), SimpleNamespace(send=sent.append))
    finally:
        gc.unfreeze()
    assert seen["frozen_while_building"] == 0
    assert seen["frozen_while_serving"] > 0
    assert [m[0] for m in sent] == ["ready"]
