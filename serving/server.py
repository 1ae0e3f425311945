"""Start-up and shutdown of ``bitcase serve``: engine, start-up checks, uvicorn, SIGTERM drain.

Start-up builds the engine in the engine process (refusing any D other than ``expected_deployment``),
runs the runtime configuration checks under the server's own engine configuration and, with a
store URL, ingests them as ``runtime_config_check`` evidence; a failing check stops the server.
SIGTERM or Ctrl-C: new requests get 503, running ones may finish for ``drain_timeout_s``, the
rest end with finish reason ``abort``, then the process exits.
"""

from __future__ import annotations

import functools
import logging
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.config import EngineConfig
from serving.app import ServerState, build_app
from serving.engine_loop import EngineLoop
from serving.metrics import Metrics
from serving.requests import Limits
from serving.text import load_codec

__all__ = ["ServeSettings", "StartupCheckFailed", "start_engine", "prepare", "run_server", "make_uvicorn"]

log = logging.getLogger("bitcase.serve")


class StartupCheckFailed(RuntimeError):
    """A runtime configuration check did not pass: the server does not serve."""


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Everything ``bitcase serve`` is started with."""

    model_dir: Path
    config: EngineConfig
    host: str = "127.0.0.1"
    port: int = 8000
    model_name: str | None = None
    max_pending: int = 256
    drain_timeout_s: float = 30.0
    startup_timeout_s: float = 600.0
    expected_deployment: str | None = None
    db_url: str | None = None  # store the start-up checks here
    sign_key: str | None = None  # a keyring key (id, name or file) that signs the stored start-up checks
    startup_checks: bool = True


def _run_checks(engine: Any, settings: ServeSettings) -> list[dict[str, Any]]:
    """Run the runtime configuration checks for ``engine``'s D; store them with ``settings.db_url``."""
    from engine.compare.api import runtime_checks

    records = runtime_checks(settings.model_dir, settings.config.device, deployment=engine.deployment,
                             command=["bitcase", "serve"], source="bitcase serve start-up", config=settings.config)
    if settings.db_url is not None:
        _store(records, settings.db_url, settings.sign_key)
    summary = [{"obligation": r.obligation, "status": r.status, "summary": r.summary} for r in records]
    failed = [r for r in records if r.status != "pass"]
    if failed:
        raise StartupCheckFailed("; ".join(r.summary for r in failed))
    return summary


def _store(records: list, db_url: str, sign_key: str | None) -> None:
    from evidence_db.bundle import write_bundle
    from evidence_db.ingest import SignaturePolicy, ingest_paths
    from evidence_db.keyring import keyring_from_env
    from evidence_db.session import open_session

    keyring = keyring_from_env()
    signer = keyring.signing_key(sign_key) if sign_key else None
    with tempfile.TemporaryDirectory(prefix="bitcase-serve-") as tmp:
        bundle = Path(tmp) / "startup-checks.jsonl"
        write_bundle(bundle, records, signer=signer)  # signed: ingest checks it and chains the signer
        with open_session(db_url, write=True) as session:
            ingest_paths(session=session, paths=[bundle], signed=SignaturePolicy(keyring.trusted()))


def start_engine(settings: ServeSettings, status: Callable[[str], None]) -> tuple[Any, list[dict[str, Any]]]:
    """Build the engine (refusing any D but the expected one) and run the start-up checks; in the
    engine process, so both see the thread count and device the engine runs with."""
    from engine.llm_engine import LLMEngine

    status("loading the engine")
    engine = LLMEngine(settings.model_dir, settings.config, expected_deployment=settings.expected_deployment)
    checks: list[dict[str, Any]] = []
    if settings.startup_checks:
        status("running the runtime configuration checks")
        checks = _run_checks(engine, settings)
    return engine, checks


def prepare(settings: ServeSettings, *, on_status: Callable[[str], None] = lambda _: None) -> tuple[Any, EngineLoop]:
    """Start the engine process (engine built and checked there); the app and the loop."""
    metrics = Metrics()
    loop = EngineLoop(functools.partial(start_engine, settings), max_pending=settings.max_pending,
                      metrics=metrics, on_status=on_status)
    loop.start(timeout_s=settings.startup_timeout_s)
    info = loop.info
    codec = load_codec(settings.model_dir)
    state = ServerState(loop=loop, codec=codec, model_name=settings.model_name or settings.model_dir.resolve().name,
                        limits=Limits(info.vocab_size, info.max_model_len, info.eos_token_ids),
                        deployment_digest=info.deployment_digest, deployment_fields=info.deployment_fields,
                        plan_digest=info.plan_digest, metrics=metrics, startup_checks=info.startup_checks)
    return build_app(state), loop


def make_uvicorn(app: Any, loop: EngineLoop, settings: ServeSettings, *, sock: socket.socket | None = None) -> Any:
    """A uvicorn server whose exit signal first drains the engine loop."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if not self.should_exit:
                log.warning("signal %s: draining (up to %.0f s), new requests get 503", sig, settings.drain_timeout_s)
                loop.drain(settings.drain_timeout_s)
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info", access_log=False,
                            timeout_graceful_shutdown=int(settings.drain_timeout_s) + 5, lifespan="off")
    return DrainingServer(config)


def run_server(settings: ServeSettings, *, on_status: Callable[[str], None] = lambda _: None) -> None:
    """Serve until a signal; returns after the drain and the engine process's end."""
    app, loop = prepare(settings, on_status=on_status)
    on_status(f"serving under D {loop.info.deployment_digest}")
    try:
        make_uvicorn(app, loop, settings).run()
    finally:
        loop.stop(timeout_s=10.0)
