"""`bitcase generate`: run requests (text or token ids in, token ids and text out) through the deterministic engine."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from assurance.cli._aliases import deprecated_alias, either
from assurance.cli._choices import DTYPES
from assurance.cli._common import BitcaseError, JsonOption, err_console, fail


def generate(
    model: Annotated[Path, typer.Option("--model", metavar="DIR", help="Checkpoint directory (config.json + *.safetensors).")],
    prompt: Annotated[Optional[list[str]], typer.Option(
        "--prompt", metavar="PROMPT", help="A text prompt, encoded by the checkpoint's tokenizer (repeat for several requests).")]
    = None,
    prompt_ids: Annotated[Optional[str], typer.Option(
        "--prompt-ids", metavar="ID,ID,...", help="One prompt as comma-separated token ids, e.g. 1,2,3.")] = None,
    prompts_file: Annotated[Optional[Path], typer.Option(
        "--prompts-file", metavar="FILE", dir_okay=False, help="One prompt per line: comma-separated token ids, or a JSON object with "
                               "token_ids or prompt (text) and any sampling field.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", metavar="N", help="Tokens to produce per request.")] = 16,
    temperature: Annotated[float, typer.Option("--temperature", metavar="T", help="0 is greedy.")] = 0.0,
    top_k: Annotated[int, typer.Option("--top-k", metavar="K", help="Keep the k most likely tokens (0: all).")] = 0,
    top_p: Annotated[float, typer.Option("--top-p", metavar="P", help="Keep the smallest set with this mass (1: all).")] = 1.0,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Sampler seed of every request.")] = 0,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos", help="Do not stop at end-of-sequence ids.")] = False,
    device: Annotated[str, typer.Option("--device", metavar="DEVICE", help="cpu, cuda or cuda:N.")] = "cpu",
    dtype: Annotated[Optional[Literal[DTYPES]], typer.Option("--dtype", help="Weights dtype (default: the checkpoint's).")]
    = None,
    page_size: Annotated[int, typer.Option("--page-size", metavar="N", help="KV page size in positions.")] = 16,
    num_pages: Annotated[int, typer.Option("--num-pages", metavar="N", help="KV pages in the pool.")] = 256,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", metavar="N", help="Requests computed per step.")] = 16,
    max_num_batched_tokens: Annotated[int, typer.Option(
        "--max-num-batched-tokens", metavar="N", help="Rows computed per step (the chunked-prefill budget).")] = 512,
    max_model_len: Annotated[int, typer.Option("--max-model-len", metavar="N", help="Longest request in positions.")] = 1024,
    check_mode: Annotated[bool, typer.Option("--check-mode", help="Check the engine invariants after every step.")] = False,
    cuda_graphs: Annotated[bool, typer.Option(
        "--cuda-graphs", help="Replay decode steps as padded CUDA graphs (CUDA only; recorded in D).")] = False,
    overlap_decode: Annotated[bool, typer.Option(
        "--overlap-decode/--no-overlap-decode",
        help="With --cuda-graphs, launch each greedy decode step before reading the previous one (values unchanged).")]
    = True,
    expect_config: Annotated[Optional[str], typer.Option(
        "--expect-config", metavar="DIGEST", help="Refuse to run unless the engine's D has this digest.")] = None,
    expect_deployment: Annotated[Optional[str], deprecated_alias("--expect-deployment", "--expect-config", metavar="DIGEST")] = None,
    json_out: JsonOption = False,
) -> None:
    """Generate tokens for prompts given as text or token ids.

    Prints one line per request in input order (index, produced token ids, finish reason and, when
    the checkpoint has a tokenizer, the produced text as a JSON string), or with --json a list of
    objects with token_ids, text, finish_reason, sampler_state and the logit-row digests. Text is
    encoded with the tokenizer's special tokens (a BOS first, as vLLM's completions do). The
    deployment configuration's digest goes to stderr.
    """
    from engine.requests_file import RequestsFileError, parse_token_ids, read_requests_file
    from engine.sampling_params import SamplingParams

    if sum(source is not None for source in (prompt, prompt_ids, prompts_file)) != 1:
        fail("give exactly one of --prompt, --prompt-ids or --prompts-file")
    tokenizer, tokenizer_error = _tokenizer(model)

    def encode(text: str) -> list[int]:
        if tokenizer is None:
            raise ValueError(tokenizer_error)
        return tokenizer.encode(text)

    defaults: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "top_k": top_k,
                                "top_p": top_p, "seed": seed, "ignore_eos": ignore_eos}
    try:
        if prompts_file is not None:
            requests = read_requests_file(prompts_file, defaults, encode=encode)
        elif prompt is not None:
            requests = [(encode(text), SamplingParams(**defaults)) for text in prompt]
        else:
            requests = [(parse_token_ids(prompt_ids or ""), SamplingParams(**defaults))]
    except RequestsFileError as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(f"{'--prompt' if prompt is not None else '--prompt-ids'} or sampling options: {exc}")

    from engine.config import EngineConfig
    from engine.deployment import DeploymentMismatch
    from engine.llm_engine import BadRequestError, LLMEngine
    from engine.model_config import ModelConfigError

    try:
        config = EngineConfig(page_size=page_size, num_pages=num_pages, max_num_seqs=max_num_seqs,
                              max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
                              check_mode=check_mode, device=device, dtype=dtype, keep_logit_rows=False,
                              cuda_graphs=cuda_graphs, overlap_decode=overlap_decode)
    except ValueError as exc:
        fail(f"engine options: {exc}")
    try:
        expected = either(expect_config, expect_deployment, new="--expect-config", old="--expect-deployment")
        engine = LLMEngine(model, config, expected_deployment=expected)
    except ModelConfigError as exc:
        fail(str(exc), hint="create a checkpoint with `bitcase model make --preset tiny DIR`")
    except DeploymentMismatch as exc:
        fail(str(exc))
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    except ValueError as exc:
        fail(f"engine options: {exc}")
    err_console.print(f"deployment {engine.deployment.digest}", highlight=False, soft_wrap=True)
    for i, (token_ids, params) in enumerate(requests):
        try:
            engine.validate(token_ids, params)
        except BadRequestError as exc:
            where = (f"{prompts_file} request {i + 1}" if prompts_file else
                     f"--prompt {i + 1}" if prompt is not None else "--prompt-ids")
            fail(f"{where}: {exc}")
    ids = [engine.add_request(token_ids, params) for token_ids, params in requests]
    started = time.perf_counter()
    with err_console.status("generating", spinner="dots"):
        outputs = {o.request_id: o for o in engine.run()}
    results = [outputs[i] for i in ids]
    num_tokens = sum(len(o.token_ids) for o in results)
    err_console.print(f"{len(results)} request(s), {num_tokens} token(s) in {engine.num_steps} step(s), "
                      f"{time.perf_counter() - started:.2f} s", highlight=False, soft_wrap=True)
    texts = [None if tokenizer is None else tokenizer.decode(o.token_ids) for o in results]
    if json_out:
        typer.echo(json.dumps([{"index": n, **o.to_dict(), "text": text}
                               for n, (o, text) in enumerate(zip(results, texts, strict=True))], indent=2))
        return
    for n, (o, text) in enumerate(zip(results, texts, strict=True)):
        line = f"{n}\t{','.join(map(str, o.token_ids))}\t{o.finish_reason}"
        typer.echo(line if text is None else f"{line}\t{json.dumps(text, ensure_ascii=False)}")


def _tokenizer(model: Path) -> tuple[Any, str | None]:
    """The checkpoint's tokenizer, or None and why not (token-id prompts need none)."""
    from engine.tokenizer import TOKENIZER_FILE, Tokenizer, TokenizerError

    try:
        return Tokenizer.from_dir(model), None
    except TokenizerError as exc:
        if (model / TOKENIZER_FILE).is_file():  # present but broken: say so even when only ids are given
            err_console.print(f"warning: no text output: {exc}", highlight=False, soft_wrap=True, markup=False)
        return None, str(exc)


def register(app: typer.Typer) -> None:
    """Add the `generate` command to the main app."""
    app.command("generate")(generate)
