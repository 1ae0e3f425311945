"""The engine: request admission and validation, the step loop, outputs, and the ``LLM`` convenience API.

One step: the scheduler plans (admission resolves every prefix hit), the runner computes the
planned rows under the sealed plan, each sampled row is sampled from its own state, then the
scheduler commits (publishes full pages, appends tokens, finishes requests). Check mode wraps
the step in the four invariants (engine/checks.py).

Greedy rows take the token the device chose (:func:`engine.sampler.greedy_tokens`) when the
runner computed one; other rows go through :func:`engine.sampler.sample`. Logit-row digests
are computed by worker threads (engine/row_digests.py), started once the next step's kernels
are launched, and waited for when an output is built.

Overlapped decode (``overlap_decode``, with ``cuda_graphs``, not in check mode): when a decode
step of greedy requests is launched, the next decode step is planned and launched before the
host reads the first one's rows, its tokens copied on the device from the first one's greedy
tokens (:meth:`engine.scheduler.Scheduler.schedule_ahead`). The host then plans, samples and
commits while the device computes. A row of a request that the earlier step finished (a stop
token) or that was cancelled meanwhile is dropped unread. Which rows share a step changes;
no row's inputs do.
"""

from __future__ import annotations

import itertools
import numbers
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from engine.block_manager import BlockManager, PageHash, chain_hash
from engine.checks import InvariantChecker
from engine.config import EngineConfig
from engine.deployment import DeploymentMismatch, build_deployment
from engine.finiteness import NonFiniteEvent, flagged_chunks
from engine.model_config import read_model_spec
from engine.model_runner import Chunk, Launched, ModelRunner, device_scope
from engine.row_digests import DigestQueue, PendingEntry, PendingTraces, resolve_entries
from engine.sampler import sample
from engine.sampling_params import SamplerState, SamplingParams
from engine.scheduler import ScheduledChunk, Scheduler, StepPlan
from engine.sequence import Sequence as Request
from engine.trace import Trace

__all__ = ["BadRequestError", "RequestOutput", "ScheduledRows", "ProducedToken", "PromptRows", "StepResult",
           "LLMEngine", "LLM"]


class BadRequestError(ValueError):
    """A request the engine refuses (nothing about it entered the engine)."""


@dataclass(frozen=True, slots=True)
class RequestOutput:
    """A request's result: produced tokens, final sampler state, trace and scheduling witnesses."""

    request_id: str
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]  # produced tokens
    finish_reason: str | None  # "stop", "length", "cancelled", "error" (engine/finiteness.py)
    sampler_state: SamplerState  # after the last produced token
    trace: Trace
    num_cached_tokens: int  # positions attached from the prefix cache, over all admissions
    prefill_chunk_ends: tuple[int, ...]  # history length computed after each prefill chunk
    num_preemptions: int
    error: str | None = None  # why it finished with reason "error"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (logit rows as digests)."""
        return {"request_id": self.request_id, "prompt_token_ids": list(self.prompt_token_ids),
                "token_ids": list(self.token_ids), "finish_reason": self.finish_reason,
                "sampler_state": self.sampler_state.to_dict(), "num_cached_tokens": self.num_cached_tokens,
                "prefill_chunk_ends": list(self.prefill_chunk_ends), "num_preemptions": self.num_preemptions,
                "error": self.error,
                "logits_digests": [e.logits_digest for e in self.trace.entries]}


@dataclass(frozen=True, slots=True)
class ScheduledRows:
    """Rows ``[start, end)`` of one request computed in a step."""

    request_id: str
    start: int
    end: int
    is_sampled: bool


@dataclass(frozen=True, slots=True)
class ProducedToken:
    """A token a step produced, for callers that stream: its row is read only until the next step.

    ``logits`` may be a view of a host slot the engine reuses a few steps later (CUDA, rows not
    kept): read it before calling :meth:`LLMEngine.step` again, or clone it.
    """

    request_id: str
    position: int  # index among the request's produced tokens
    token: int
    logits: torch.Tensor  # [V] float32 on the CPU
    digest: Future  # of the row's ``sha256:`` digest; finishes once a later step or output starts it


@dataclass(frozen=True, slots=True)
class PromptRows:
    """Logit rows of prompt positions ``start .. start + len(rows) - 1`` (``SamplingParams.prompt_logits``).

    The row at position ``p`` is the distribution of the token at ``p + 1``; the row of the last
    prompt position is the first produced token's (it is in the trace, not here).
    """

    request_id: str
    start: int
    rows: torch.Tensor  # [n, V] float32 on the CPU, the engine's own copy


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one step did (for suites that need witnesses), what it produced, and which requests it finished."""

    step_index: int
    scheduled: tuple[ScheduledRows, ...]
    admitted: tuple[str, ...]
    preempted: tuple[str, ...]
    num_evicted_pages: int
    finished: tuple[RequestOutput, ...]
    produced: tuple[ProducedToken, ...] = ()
    prompt_rows: tuple[PromptRows, ...] = ()
    nonfinite: tuple[NonFiniteEvent, ...] = ()  # requests the finiteness check ended in this step


def _output(seq: Request) -> RequestOutput:
    trace = Trace(seq.prompt_token_ids, seq.params.initial_state(), list(resolve_entries(seq.trace)))
    return RequestOutput(seq.request_id, seq.prompt_token_ids, tuple(seq.output_token_ids), seq.finish_reason,
                         seq.sampler_state, trace, seq.total_cached_tokens, tuple(seq.prefill_chunk_ends),
                         seq.num_preemptions, seq.error)


def _prompt_rows(c: ScheduledChunk) -> tuple[int, int]:
    """Positions of ``c`` whose prompt logit rows are wanted and not yet handed out."""
    if not c.seq.params.prompt_logits:
        return (0, 0)
    start, end = max(c.start, c.seq.num_prompt_rows_out), min(c.end, c.seq.num_prompt_tokens - 1)
    return (start, end) if end > start else (0, 0)


def _chunks(chunks: Sequence[ScheduledChunk]) -> list[Chunk]:
    return [Chunk(c.seq.token_ids, c.seq.page_table, c.start, c.end, c.is_sampled, _prompt_rows(c)) for c in chunks]


class LLMEngine:
    """A deterministic engine over one checkpoint, with the step-level API."""

    def __init__(self, model_dir: str | Path, config: EngineConfig | None = None, *,
                 page_hash: PageHash = chain_hash, expected_deployment: str | None = None) -> None:
        self.config = config or EngineConfig()
        self.model_dir = Path(model_dir)
        self.spec = read_model_spec(self.model_dir)
        if self.config.max_model_len > self.spec.max_position_embeddings:
            raise ValueError(f"max_model_len {self.config.max_model_len} exceeds the model's "
                             f"max_position_embeddings {self.spec.max_position_embeddings}")
        self.dtype = self.spec.serving_dtype(self.config.dtype)
        torch.set_num_threads(self.config.num_threads)  # CPU reductions may depend on it: part of D
        self.runner = ModelRunner(self.model_dir, self.spec, self.config, self.dtype)
        self.deployment = build_deployment(spec=self.spec, config=self.config, dtype=self.dtype,
                                           plan=self.runner.plan, weights_digest=self.runner.weights_digest,
                                           num_threads=torch.get_num_threads())
        if expected_deployment is not None and expected_deployment != self.deployment.digest:
            raise DeploymentMismatch(f"this engine runs under D {self.deployment.digest}, not the expected "
                                     f"{expected_deployment}; refusing to serve")
        self.block_manager = BlockManager(self.config.num_pages, self.config.page_size, page_hash=page_hash,
                                          enable_prefix_caching=self.config.enable_prefix_caching)
        self.scheduler = Scheduler(self.config, self.block_manager)
        self.checker = InvariantChecker(self) if self.config.check_mode else None
        self.digests = DigestQueue()  # sampled rows waiting for their digests
        self.pending_traces = PendingTraces()  # trace entries resolved as their digests finish
        self.stop_token_ids = frozenset(self.spec.eos_token_ids)
        self.num_steps = 0
        self._ids = itertools.count()
        self._used_ids: set[str] = set()
        self._failure: BaseException | None = None
        # A step planned and launched ahead, not yet read: (plan, launched)
        self._ahead: tuple[StepPlan, Launched] | None = None
        self.can_overlap = self.config.overlap_decode and self.config.cuda_graphs and not self.config.check_mode
        self.num_steps_ahead = 0  # decode steps launched before the previous step's rows were read
        self.num_dropped_rows = 0  # their rows of requests that had finished meanwhile, dropped unread
        self.nonfinite_events: list[NonFiniteEvent] = []  # requests the finiteness check ended
        self._no_logits = torch.empty(0, self.spec.vocab_size)  # [0, V]: a step that computed nothing

    # --- requests ----------------------------------------------------------------------------
    def validate(self, prompt_token_ids: Sequence[int], params: SamplingParams) -> None:
        """Raise :class:`BadRequestError` saying what is wrong with a request (changes nothing)."""
        self._validated(prompt_token_ids, params)

    def _validated(self, prompt_token_ids: Sequence[int], params: SamplingParams) -> tuple[int, ...]:
        """:meth:`validate`; returns the prompt as a tuple of plain ints."""
        if not isinstance(params, SamplingParams):
            raise BadRequestError(f"sampling must be a SamplingParams, got {type(params).__name__}")
        if isinstance(prompt_token_ids, (str, bytes)) or not isinstance(prompt_token_ids, Sequence):
            raise BadRequestError(f"a prompt is a list of token ids, got {type(prompt_token_ids).__name__}")
        if not prompt_token_ids:
            raise BadRequestError("the prompt is empty; give at least one token id")
        vocab, prompt = self.spec.vocab_size, tuple(prompt_token_ids)
        # Plain ints in range, checked in bulk (a 16K-token prompt: a few ms one by one); anything
        # else is looked at token by token, to name the first bad one.
        if not (set(map(type, prompt)) <= {int} and 0 <= min(prompt) and max(prompt) < vocab):
            for i, t in enumerate(prompt):
                if not isinstance(t, numbers.Integral) or isinstance(t, bool) or not 0 <= t < vocab:
                    raise BadRequestError(f"prompt token {i} is {t!r}; token ids are integers in [0, {vocab})")
            prompt = tuple(int(t) for t in prompt)  # numpy integers become plain ints
        needed = len(prompt) + params.max_tokens
        if needed > self.config.max_model_len:
            raise BadRequestError(f"request needs {needed} positions (prompt {len(prompt)} + max_tokens "
                                  f"{params.max_tokens}) but max_model_len is {self.config.max_model_len}")
        return prompt

    def add_request(self, prompt_token_ids: Sequence[int], params: SamplingParams | None = None, *,
                    request_id: str | None = None) -> str:
        """Validate and queue a request; returns its id."""
        params = SamplingParams() if params is None else params
        prompt = self._validated(prompt_token_ids, params)
        if request_id is None:
            request_id = next(f"req-{n}" for n in self._ids if f"req-{n}" not in self._used_ids)
        elif not isinstance(request_id, str) or not request_id or request_id in self._used_ids:
            raise BadRequestError(f"request id {request_id!r} is empty or already used in this engine")
        stop = frozenset() if params.ignore_eos else self.stop_token_ids
        if params.stop_token_ids is not None:
            stop = frozenset(params.stop_token_ids)
        self._used_ids.add(request_id)
        self.scheduler.add(Request(request_id, prompt, params, stop_token_ids=stop))
        return request_id

    def cancel(self, request_id: str) -> RequestOutput | None:
        """Cancel a queued or running request, freeing its pages; None when it is not unfinished."""
        seq = self.scheduler.cancel(request_id)
        return None if seq is None else self._output(seq)

    def _output(self, seq: Request) -> RequestOutput:
        """``seq``'s output; starts queued digests first, since the output waits for its own."""
        self.digests.start()
        return _output(seq)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    # --- the step loop -------------------------------------------------------------------------
    def step(self) -> StepResult:
        """Plan, compute, sample and commit one step."""
        if self._failure is not None:
            raise RuntimeError(f"the engine stopped after an earlier failure: {self._failure}") from self._failure
        try:
            with device_scope(self.runner.device):
                return self._step()
        except BaseException as exc:
            self._failure = exc
            raise

    def _step(self) -> StepResult:
        self._drop_dead_ahead()
        if self._ahead is not None:
            (plan, launched), self._ahead = self._ahead, None
            live = {id(c) for c in Scheduler.live_chunks(plan)}
            rows = [i for i, c in enumerate(plan.chunks) if id(c) in live]  # launched rows still wanted
            self.num_dropped_rows += len(plan.chunks) - len(rows)
            plan = StepPlan(tuple(plan.chunks[i] for i in rows), (), (), plan.num_evicted_pages)
            launched_index = rows
        else:
            plan = self.scheduler.schedule()
            if not plan.chunks and self.scheduler.has_unfinished():
                raise RuntimeError("the scheduler planned an empty step while requests are unfinished")
            if self.checker:
                self.checker.before_forward(plan)
            launched = self.runner.launch(_chunks(plan.chunks)) if plan.chunks else None
            rows = list(range(len(plan.sampled)))
            launched_index = list(range(len(plan.chunks)))
        if launched is not None and self.can_overlap and all(c.seq.params.is_greedy for c in plan.chunks):
            self._launch_ahead(plan, launched, rows)
        self.digests.start()
        # host work while the device computes the step
        self.pending_traces.resolve_done()
        self.scheduler.hash_pages(plan)
        logits, greedy_tokens = self._no_logits, None
        if launched is not None:
            logits = self.runner.collect(launched)
            greedy_tokens = self.runner.last_greedy_tokens
            if launched.input_ids is not None:
                self._check_inputs_taken_ahead(plan, rows)
        events = flagged_chunks(self.num_steps, plan.chunks, self.runner.last_nonfinite, launched_index) \
            if launched is not None else []
        self.nonfinite_events.extend(events)
        failed = {e.request_id: e.message for e in events}
        if self.checker:
            self.checker.after_forward(plan, self.runner.last_launches, logits, failed)
        prompt_rows = self._hand_out_prompt_rows(plan, failed) \
            if launched is not None and launched.num_prompt_rows else ()
        sampled, readers, produced = [], [], []
        for chunk, r in zip(plan.sampled, rows):
            if chunk.seq.request_id in failed:  # its row of this step is not trusted: no token
                continue
            row, seq = logits[r], chunk.seq  # row: [V] float32
            if seq.params.is_greedy and greedy_tokens is not None:
                token, state = greedy_tokens[r], seq.sampler_state.advanced()
            else:
                token, state = sample(row, seq.params, seq.sampler_state)
            kept = row.clone() if self.config.keep_logit_rows else None
            digest = self.digests.add(row if kept is None else kept)
            if kept is None:
                readers.append(digest)
            self.pending_traces.add(seq.trace, len(seq.trace))
            seq.trace.append(PendingEntry(seq.num_output_tokens, token, state, digest, kept))
            produced.append(ProducedToken(seq.request_id, seq.num_output_tokens, token,
                                          row if kept is None else kept, digest))
            sampled.append((token, state))
        self.runner.keep_rows_for(readers)
        finished = self.scheduler.commit(plan, sampled, failed)
        if self.checker:
            self.checker.after_commit()
        self._drop_dead_ahead()
        scheduled = tuple(ScheduledRows(c.seq.request_id, c.start, c.end, c.is_sampled) for c in plan.chunks)
        result = StepResult(self.num_steps, scheduled, plan.admitted, plan.preempted, plan.num_evicted_pages,
                            tuple(self._output(s) for s in finished), tuple(produced), prompt_rows, tuple(events))
        self.num_steps += 1
        return result

    def _hand_out_prompt_rows(self, plan: StepPlan, failed: dict[str, str]) -> tuple[PromptRows, ...]:
        """Split the step's prompt rows by request (chunk order, as the runner packed them); none of
        a request the finiteness check ended."""
        rows, out, offset = self.runner.last_prompt_rows, [], 0
        for chunk in plan.chunks:
            start, end = _prompt_rows(chunk)
            if end > start and chunk.seq.request_id in failed:
                offset += end - start
            elif end > start:
                out.append(PromptRows(chunk.seq.request_id, start, rows[offset:offset + end - start].clone()))
                chunk.seq.num_prompt_rows_out = end
                offset += end - start
        return tuple(out)

    def _check_inputs_taken_ahead(self, plan: StepPlan, rows: list[int]) -> None:
        """Each row of a step launched ahead read the token its request's history now holds there."""
        read = self.runner.last_input_tokens
        assert read is not None
        for chunk, r in zip(plan.chunks, rows):
            if read[r] != chunk.seq.token_ids[chunk.start]:
                raise RuntimeError(f"request {chunk.seq.request_id}: the step launched ahead read token {read[r]} "
                                   f"at position {chunk.start}, but the history holds "
                                   f"{chunk.seq.token_ids[chunk.start]} there")

    def _drop_dead_ahead(self) -> None:
        """Wait for and forget a step launched ahead none of whose requests still runs."""
        if self._ahead is not None and not Scheduler.live_chunks(self._ahead[0]):
            self.runner.collect(self._ahead[1])
            self.num_dropped_rows += len(self._ahead[0].chunks)
            self._ahead = None

    def _launch_ahead(self, plan: StepPlan, launched: Launched, rows: list[int]) -> None:
        """Plan and launch the decode step after ``plan`` (launched, rows not yet read), if it can be."""
        ahead = self.scheduler.schedule_ahead(plan, max_num_rows=max(self.config.graph_batch_sizes))
        if ahead is None:
            return
        row_of = {id(c.seq): r for c, r in zip(plan.chunks, rows)}
        source_rows = [row_of[id(c.seq)] for c in ahead.chunks]
        self._ahead = (ahead, self.runner.launch(_chunks(ahead.chunks), tokens_from=(launched, source_rows)))
        self.num_steps_ahead += 1

    def run(self) -> list[RequestOutput]:
        """Step until nothing is unfinished; the finished outputs in finishing order."""
        outputs: list[RequestOutput] = []
        while self.has_unfinished():
            outputs.extend(self.step().finished)
        return outputs


class LLM:
    """``LLM(model_dir, **config).generate(prompts, sampling)``: run a batch of requests to completion."""

    def __init__(self, model_dir: str | Path, *, page_hash: PageHash = chain_hash,
                 expected_deployment: str | None = None, **config: Any) -> None:
        self.engine = LLMEngine(model_dir, EngineConfig.from_kwargs(**config), page_hash=page_hash,
                                expected_deployment=expected_deployment)

    def generate(self, prompts: Sequence[Sequence[int]],
                 sampling: SamplingParams | Iterable[SamplingParams] | None = None) -> list[RequestOutput]:
        """Outputs in prompt order. Every request is validated before any is queued."""
        if sampling is None or isinstance(sampling, SamplingParams):
            params = [sampling or SamplingParams()] * len(prompts)
        else:
            params = list(sampling)
            if len(params) != len(prompts):
                raise BadRequestError(f"{len(params)} sampling parameters for {len(prompts)} prompts")
        for i, (prompt, p) in enumerate(zip(prompts, params)):
            try:
                self.engine.validate(prompt, p)
            except BadRequestError as exc:
                raise BadRequestError(f"request {i}: {exc}") from None
        ids = [self.engine.add_request(prompt, p) for prompt, p in zip(prompts, params)]
        done = {o.request_id: o for o in self.engine.run()}
        return [done[i] for i in ids]
