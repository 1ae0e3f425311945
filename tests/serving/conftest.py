"""A tiny checkpoint with a tokenizer, and servers on 127.0.0.1 (ephemeral ports) run in threads."""

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.checkpoint import make_checkpoint
from engine.config import EngineConfig
from engine.tokenizer_make import write_tokenizer

START_TIMEOUT_S = 60


@dataclass
class Served:
    base_url: str  # http://127.0.0.1:PORT
    loop: object  # the EngineLoop (tests read its metrics, never its engine)
    settings: object

    @property
    def v1(self) -> str:
        return self.base_url + "/v1"


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    directory = make_checkpoint("tiny", tmp_path_factory.mktemp("serve-tiny"), seed=0)
    write_tokenizer(directory)
    return directory


@contextmanager
def running_server(model_dir: Path, **settings_kwargs):
    """Start a server in a thread; wait (bounded) until it listens; stop it afterwards."""
    from serving.server import ServeSettings, make_uvicorn, prepare

    config = settings_kwargs.pop("config", EngineConfig(keep_logit_rows=False))
    settings = ServeSettings(model_dir=model_dir, config=config, port=0, model_name="tiny", **settings_kwargs)
    app, loop = prepare(settings)
    server = make_uvicorn(app, loop, settings)
    server.config.log_level = "warning"
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the test server did not start within {START_TIMEOUT_S} s")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", loop, settings)
    finally:
        server.should_exit = True
        thread.join(15)
        loop.stop(timeout_s=10)


@pytest.fixture(scope="session")
def served(model_dir):
    with running_server(model_dir) as s:
        yield s


@pytest.fixture
def client(served):
    import openai

    return openai.OpenAI(base_url=served.v1, api_key="unused", max_retries=0, timeout=60)
