"""`bitcase serve`: the deterministic engine behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from assurance.cli._aliases import deprecated_alias, either
from assurance.cli._choices import DTYPES
from assurance.cli._common import BitcaseError, DbOption, err_console, fail
from assurance.cli._signing import SignKeyOption, load_signing_key
from engine.config import EngineConfig

_DEFAULTS = EngineConfig()  # the options' defaults are the engine's own


def serve(
    model: Annotated[Path, typer.Option("--model", metavar="DIR", help="Checkpoint directory (config.json + *.safetensors; "
                                                        "tokenizer.json for text).", show_default=False)],
    host: Annotated[str, typer.Option("--host", metavar="ADDRESS", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port to listen on (0: any free port).")] = 8000,
    served_model_name: Annotated[Optional[str], typer.Option(
        "--served-model-name", metavar="NAME", help="Model name clients send (default: the directory's name).")] = None,
    max_pending: Annotated[int, typer.Option(
        "--max-pending", metavar="N", help="Engine requests queued or running at once; more get 429.")] = 256,
    drain_timeout: Annotated[float, typer.Option(
        "--drain-timeout", metavar="SECONDS", help="Seconds SIGTERM lets running requests finish before aborting them.")] = 30.0,
    device: Annotated[str, typer.Option("--device", metavar="DEVICE", help="cpu, cuda or cuda:N.")] = _DEFAULTS.device,
    dtype: Annotated[Optional[Literal[DTYPES]], typer.Option("--dtype", help="Weights dtype (default: the checkpoint's).")]
    = None,
    page_size: Annotated[int, typer.Option("--page-size", metavar="N", help="KV page size in positions.")] = _DEFAULTS.page_size,
    num_pages: Annotated[int, typer.Option("--num-pages", metavar="N", help="KV pages in the pool.")] = _DEFAULTS.num_pages,
    max_num_seqs: Annotated[int, typer.Option(
        "--max-num-seqs", metavar="N", help="Requests computed per step.")] = _DEFAULTS.max_num_seqs,
    max_num_batched_tokens: Annotated[int, typer.Option(
        "--max-num-batched-tokens", metavar="N", help="Rows computed per step (the chunked-prefill budget).")]
    = _DEFAULTS.max_num_batched_tokens,
    max_model_len: Annotated[int, typer.Option(
        "--max-model-len", metavar="N", help="Longest request in positions.")] = _DEFAULTS.max_model_len,
    cuda_graphs: Annotated[bool, typer.Option(
        "--cuda-graphs", help="Replay decode steps as padded CUDA graphs (CUDA only; recorded in D).")] = False,
    expect_config: Annotated[Optional[str], typer.Option(
        "--expect-config", metavar="DIGEST", help="Refuse to start unless the engine's D has this digest.")] = None,
    expect_deployment: Annotated[Optional[str], deprecated_alias("--expect-deployment", "--expect-config", metavar="DIGEST")] = None,
    db: DbOption = None,
    sign_key: SignKeyOption = None,
) -> None:
    """Serve the model over an OpenAI-compatible HTTP API until SIGTERM or Ctrl-C.

    Endpoints: /v1/models, /v1/completions, /v1/chat/completions (SSE with stream=true), /health,
    /metrics (Prometheus) and /bitcase/deployment (D and the sealed plan digest). Every response's
    system_fingerprint is D's digest. Start-up runs the runtime configuration checks and refuses to
    serve if one fails; with --db (or $BITCASE_DB) they are stored as evidence (signed with
    --sign-key). SIGTERM drains.
    """
    import logging

    from serving.server import ServeSettings, StartupCheckFailed, run_server

    url = None
    if db is not None:
        from assurance.settings import resolve_db_url

        url = resolve_db_url(db)
    if sign_key and url is None:
        fail("--sign-key signs the start-up checks stored with --db; pass --db too")
    if sign_key:
        from evidence_db.errors import KeyringError

        try:
            load_signing_key(sign_key)  # a bad key fails here, before the engine is built
        except KeyringError as exc:
            fail(str(exc), hint=exc.hint)
    try:
        expected = either(expect_config, expect_deployment, new="--expect-config", old="--expect-deployment")
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    if not 0 <= port <= 65535:
        fail(f"--port {port} is not a port number (0-65535)")
    if max_pending < 1 or drain_timeout < 0:
        fail("--max-pending must be at least 1 and --drain-timeout at least 0")
    if not (model / "config.json").is_file():
        fail(f"--model {model}: no config.json there", hint="create a checkpoint with `bitcase model make --preset tiny DIR`")
    try:
        config = EngineConfig(page_size=page_size, num_pages=num_pages, max_num_seqs=max_num_seqs,
                              max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
                              device=device, dtype=dtype, keep_logit_rows=False, cuda_graphs=cuda_graphs)
    except ValueError as exc:
        fail(f"engine options: {exc}")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    settings = ServeSettings(model_dir=model, config=config, host=host, port=port, model_name=served_model_name,
                             max_pending=max_pending, drain_timeout_s=drain_timeout,
                             expected_deployment=expected, db_url=url, sign_key=sign_key)
    from engine.deployment import DeploymentMismatch
    from engine.model_config import ModelConfigError
    from evidence_db.errors import StoreError

    def status(message: str) -> None:
        err_console.print(message, highlight=False, soft_wrap=True)

    try:
        run_server(settings, on_status=status)
    except (DeploymentMismatch, StartupCheckFailed) as exc:
        fail(str(exc), code=1)
    except ModelConfigError as exc:
        fail(str(exc), hint="create a checkpoint with `bitcase model make --preset tiny DIR`")
    except StoreError as exc:
        fail(f"--db: {exc}")
    except (TimeoutError, ValueError, OSError) as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    """Add the `serve` command to the main app."""
    app.command("serve")(serve)
