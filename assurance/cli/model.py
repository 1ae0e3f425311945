"""`bitcase model ...`: write random-initialised preset checkpoints (with tokenizers) and describe checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from assurance.cli._choices import DTYPES, PRESETS
from assurance.cli._common import JsonOption, err_console, fail

model_app = typer.Typer(help="Make and inspect Hugging Face-format model checkpoints.", no_args_is_help=True)

ModelDir = Annotated[Path, typer.Argument(metavar="DIR", help="Checkpoint directory (config.json + *.safetensors).")]


@model_app.command("make")
def make(
    out_dir: ModelDir,
    preset: Annotated[Literal[PRESETS], typer.Option("--preset", help=(
        "Shape: tiny (Llama), small (Qwen2), llama-1b (Llama-3.2-1B), qwen3-tiny, qwen3-0.6b (Qwen3-0.6B), "
        "mistral-tiny, mistral-7b (Mistral-7B-v0.3), gemma3-tiny or gemma3-1b (Gemma3-1B)."))] = "tiny",
    seed: Annotated[int, typer.Option("--seed", metavar="N", min=0, help="Seed of the random weights.")] = 0,
    dtype: Annotated[Optional[Literal[DTYPES]], typer.Option("--dtype", help="Weights dtype (default: the preset's).")] = None,
    max_shard_mb: Annotated[Optional[int], typer.Option(
        "--max-shard-mb", metavar="MB", min=1, help="Split the weights into shards of at most this size, with an index.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a directory that already holds a checkpoint.")] = False,
) -> None:
    """Write a random-initialised checkpoint with real Hugging Face tensor names, shapes and config.json.

    A small real tokenizer comes with it (as `bitcase model tokenizer` writes). The same preset,
    seed and dtype always write the same bytes. Prints the directory and the weights digest.
    """
    if (out_dir / "config.json").exists() and not force:
        fail(f"{out_dir} already holds a checkpoint", hint="pass --force to overwrite it")
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"{out_dir} exists and is not a directory")
    from engine.checkpoint import DEFAULT_MAX_SHARD_BYTES, make_checkpoint
    from engine.loader import read_checkpoint, weights_digest
    from engine.model_config import read_model_spec

    shard_bytes = DEFAULT_MAX_SHARD_BYTES if max_shard_mb is None else max_shard_mb * 1024 * 1024
    with err_console.status(f"writing the {preset} checkpoint (seed {seed}) to {out_dir}", spinner="dots"):
        try:
            make_checkpoint(preset, out_dir, seed=seed, dtype=dtype, max_shard_bytes=shard_bytes)
        except OSError as exc:
            fail(f"cannot write {out_dir}: {exc}")
        digest = weights_digest(read_checkpoint(out_dir, read_model_spec(out_dir)))
    typer.echo(f"{out_dir}\t{digest}")


@model_app.command("tokenizer")
def tokenizer(
    model_dir: ModelDir,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a tokenizer.json that is already there.")] = False,
) -> None:
    """Write a small real tokenizer that fits a checkpoint's config.json, for text prompts.

    Byte-level BPE trained on text bitcase ships, with exactly config.json's vocab_size entries
    and Llama 3's special tokens from its bos_token_id on (ids the corpus cannot fill are reserved
    special tokens), tokenizer_config.json with a Llama-3-style chat template, and
    generation_config.json. Weights and config.json are not touched, so D stays the same. The
    same config.json always gives the same bytes. Prints the directory and the tokenizer digest.
    """
    from engine.tokenizer import TOKENIZER_FILE, Tokenizer
    from engine.tokenizer_make import write_tokenizer

    if not (model_dir / "config.json").is_file():
        fail(f"{model_dir} has no config.json", hint="make a checkpoint with `bitcase model make DIR` first")
    if (model_dir / TOKENIZER_FILE).exists() and not force:
        fail(f"{model_dir} already has a {TOKENIZER_FILE}", hint="pass --force to overwrite it")
    with err_console.status(f"training the tokenizer for {model_dir}", spinner="dots"):
        try:
            write_tokenizer(model_dir)
        except (OSError, ValueError) as exc:
            fail(f"cannot write a tokenizer for {model_dir}: {exc}")
    typer.echo(f"{model_dir}\t{Tokenizer.from_dir(model_dir).digest}")


@model_app.command("info")
def info(model_dir: ModelDir, json_out: JsonOption = False) -> None:
    """Describe a checkpoint: architecture, shape, dtype, RoPE scaling, weights and tokenizer digests."""
    from engine.loader import read_checkpoint, weights_digest
    from engine.model_config import ModelConfigError, read_model_spec
    from engine.tokenizer import TOKENIZER_FILE, Tokenizer, TokenizerError

    try:
        spec = read_model_spec(model_dir)
        digest = weights_digest(read_checkpoint(model_dir, spec))
    except ModelConfigError as exc:
        fail(str(exc), hint="point to a directory written by `bitcase model make` or a Hugging Face export")
    tok = None
    if (model_dir / TOKENIZER_FILE).is_file():
        try:
            tok = Tokenizer.from_dir(model_dir)
        except TokenizerError as exc:
            err_console.print(f"warning: {exc}", highlight=False, soft_wrap=True, markup=False)
    data = {"model_dir": str(model_dir), "architecture": spec.architecture, "hidden_size": spec.hidden_size,
            "num_layers": spec.num_layers, "num_heads": spec.num_heads, "num_kv_heads": spec.num_kv_heads,
            "head_dim": spec.head_dim, "intermediate_size": spec.intermediate_size,
            "vocab_size": spec.vocab_size, "has_qkv_bias": spec.has_qkv_bias,
            "has_o_proj_bias": spec.has_o_proj_bias, "has_qk_norm": spec.has_qk_norm,
            "tie_word_embeddings": spec.tie_word_embeddings, "rope_theta": spec.rope_theta,
            "rope_scaling": spec.rope_scaling_dict, "max_position_embeddings": spec.max_position_embeddings,
            "layer_windows": list(spec.layer_windows), "sliding_rope_theta": spec.sliding_rope_theta,
            "checkpoint_dtype": spec.checkpoint_dtype, "eos_token_ids": list(spec.eos_token_ids),
            "config_digest": spec.config_digest, "weights_digest": digest,
            "tokenizer_digest": None if tok is None else tok.digest,
            "tokenizer_vocab_size": None if tok is None else tok.vocab_size,
            "has_chat_template": None if tok is None else tok.has_chat_template}
    if json_out:
        typer.echo(json.dumps(data, indent=2))
        return
    for key, value in data.items():
        typer.echo(f"{key}\t{value}")


def register(app: typer.Typer) -> None:
    """Add the `model` group to the main app."""
    app.add_typer(model_app, name="model")
