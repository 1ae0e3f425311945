"""Continuous batching with chunked prefill, admission by free pages and recompute preemption (torch-free).

Every scheduled item is a chunk ``[start, end)`` of a request's logical history with
``start == num_computed_tokens``. A chunk that reaches the end of the history is *sampled*
(prefill's last chunk or a decode step); a chunk that does not is *partial* and ends on a page
boundary. Admission reserves pages for the whole history, so prefill never waits for a page;
a decode that needs a new page preempts the youngest running request (recompute: its pages are
released and it re-enters the queue with its history, prompt plus produced tokens). None of
these choices changes a value: the model contract makes every row a function of its history.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Mapping, Sequence as Seq

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.sampling_params import SamplerState
from engine.sequence import RequestStatus, Sequence

__all__ = ["ScheduledChunk", "StepPlan", "Scheduler"]


@dataclass(frozen=True, slots=True)
class ScheduledChunk:
    """Positions ``[start, end)`` of one request computed in this step."""

    seq: Sequence
    start: int
    end: int
    is_sampled: bool  # the chunk reaches the end of the history: its last row is sampled

    @property
    def num_tokens(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What one step computes, and what scheduling did to get there (witnesses for traces)."""

    chunks: tuple[ScheduledChunk, ...]
    admitted: tuple[str, ...]
    preempted: tuple[str, ...]
    num_evicted_pages: int

    @property
    def num_tokens(self) -> int:
        return sum(c.num_tokens for c in self.chunks)

    @property
    def sampled(self) -> tuple[ScheduledChunk, ...]:
        return tuple(c for c in self.chunks if c.is_sampled)


class Scheduler:
    """Queues, the running set and the per-step plan; pages come from the :class:`BlockManager`."""

    def __init__(self, config: EngineConfig, block_manager: BlockManager) -> None:
        self.page_size = config.page_size
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        """Queue a validated request."""
        seq.status = RequestStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def cancel(self, request_id: str) -> Sequence | None:
        """Finish a queued or running request as cancelled, freeing its pages; None if unknown."""
        for seq in list(self.waiting) + self.running:
            if seq.request_id == request_id:
                self._finish(seq, "cancelled")
                return seq
        return None

    def schedule(self) -> StepPlan:
        """Plan one step under the token budget, the sequence limit and the free pages."""
        bm = self.block_manager
        evictions_before = bm.num_evictions
        budget = self.max_num_batched_tokens
        chunks: list[ScheduledChunk] = []
        preempted: list[str] = []
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            end = self._chunk_end(seq.num_computed_tokens, seq.num_tokens, budget)
            if end is None:
                i += 1
                continue
            if not self._reserve(seq, end, preempted):
                continue  # seq itself was preempted (it was the youngest)
            chunks.append(ScheduledChunk(seq, seq.num_computed_tokens, end, end == seq.num_tokens))
            budget -= end - seq.num_computed_tokens
            i += 1
        admitted: list[str] = []
        while self.waiting and not preempted and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            # A request that wants every prompt row computes them all: a cache hit would skip rows.
            hits = [] if seq.params.prompt_logits else bm.match_prefix(seq.token_ids, seq.page_hashes)
            num_new_pages = math.ceil(seq.num_tokens / self.page_size) - len(hits)
            num_revived = sum(1 for pid in hits if bm.pages[pid].ref_count == 0)
            if num_new_pages > bm.num_available_pages - num_revived:
                break  # first come, first served: nobody overtakes the head of the queue
            start = len(hits) * self.page_size
            end = self._chunk_end(start, seq.num_tokens, budget)
            if end is None:
                break
            self.waiting.popleft()
            bm.attach(seq.page_table, hits)
            for _ in range(num_new_pages):
                bm.allocate(seq.page_table)
            seq.num_computed_tokens = seq.num_cached_tokens = start
            seq.total_cached_tokens += start
            seq.num_tokens_at_admission = seq.num_tokens
            seq.status = RequestStatus.RUNNING
            self.running.append(seq)
            admitted.append(seq.request_id)
            chunks.append(ScheduledChunk(seq, start, end, end == seq.num_tokens))
            budget -= end - start
        return StepPlan(tuple(chunks), tuple(admitted), tuple(preempted), bm.num_evictions - evictions_before)

    def hash_pages(self, plan: StepPlan) -> None:
        """Compute the page hashes :meth:`commit` of ``plan`` publishes with (host work while the
        device computes the step): only pages of tokens the history already holds."""
        if not self.block_manager.enable_prefix_caching:
            return
        for c in plan.chunks:
            seq = c.seq
            self.block_manager.page_hashes(seq.token_ids, min(c.end, seq.num_tokens) // self.page_size,
                                           seq.page_hashes)

    def schedule_ahead(self, plan: StepPlan, *, max_num_rows: int) -> StepPlan | None:
        """Plan the decode step after ``plan`` before ``plan`` is committed; None when it cannot be.

        Possible when ``plan`` is a decode step of every running request, nothing waits for
        admission, and the pages for one more position of each continuing request are free
        without preempting. A request continues unless ``plan``'s commit makes it reach
        ``max_tokens``; a request the commit finishes otherwise (a stop token) or a later
        cancel leaves a *dead* chunk in the returned plan, which the caller drops
        (:meth:`live_chunks`). Its row writes K/V only to the request's own page past its
        history, a page released with the request and never published. The new chunks start
        at ``plan``'s ends: their token is the one ``plan`` samples, still unknown here.
        """
        if self.waiting or not plan.chunks or len(plan.chunks) != len(self.running) or \
                any(c.num_tokens != 1 or not c.is_sampled for c in plan.chunks) or \
                {id(c.seq) for c in plan.chunks} != {id(s) for s in self.running}:
            return None
        # history after the commit is end + 1 positions, of which end + 1 - prompt are produced
        going_on = [c for c in plan.chunks
                    if c.end + 1 - c.seq.num_prompt_tokens < c.seq.params.max_tokens]
        if not going_on or len(going_on) > min(self.max_num_batched_tokens, max_num_rows):
            return None
        bm = self.block_manager
        num_new_pages = [c.end // self.page_size + 1 - len(c.seq.page_table) for c in going_on]
        if sum(num_new_pages) > bm.num_available_pages:
            return None
        evictions_before = bm.num_evictions
        for c, num_needed in zip(going_on, num_new_pages):
            for _ in range(num_needed):
                bm.allocate(c.seq.page_table)
        chunks = tuple(ScheduledChunk(c.seq, c.end, c.end + 1, True) for c in going_on)
        return StepPlan(chunks, (), (), bm.num_evictions - evictions_before)

    @staticmethod
    def live_chunks(plan: StepPlan) -> tuple[ScheduledChunk, ...]:
        """The chunks of a plan made ahead whose request still runs from exactly the chunk's start."""
        live = []
        for c in plan.chunks:
            if c.seq.status is not RequestStatus.RUNNING:
                continue  # finished by the previous commit (a stop token) or cancelled since
            if c.seq.num_computed_tokens != c.start or c.seq.num_tokens != c.end:
                raise RuntimeError(f"request {c.seq.request_id}: a step planned ahead for positions "
                                   f"[{c.start}, {c.end}) no longer matches its history of {c.seq.num_tokens} "
                                   f"({c.seq.num_computed_tokens} computed)")
            live.append(c)
        return tuple(live)

    def commit(self, plan: StepPlan, sampled: Seq[tuple[int, SamplerState]],
               failed: Mapping[str, str] | None = None) -> list[Sequence]:
        """Apply a computed step: publish full pages, append sampled tokens, finish requests.

        ``sampled`` holds ``(token, sampler state after the step)`` for the plan's sampled
        chunks that did not fail, in plan order. ``failed`` maps the request ids of chunks whose
        rows the run-time finiteness check flagged to the error: those requests finish with
        reason "error" and, since the step broke a premise, none of its pages is published
        (later steps of the other requests publish theirs). Returns the requests that finished.
        """
        failed = failed or {}
        expected = sum(1 for c in plan.sampled if c.seq.request_id not in failed)
        if len(sampled) != expected:
            raise ValueError(f"{len(sampled)} sampled tokens for {expected} sampled chunks")
        results = iter(sampled)
        finished: list[Sequence] = []
        for chunk in plan.chunks:
            seq = chunk.seq
            if seq.request_id in failed:
                seq.error = failed[seq.request_id]
                self._finish(seq, "error")
                finished.append(seq)
                continue
            seq.num_computed_tokens = chunk.end
            if not failed:
                self.block_manager.publish(seq.page_table, seq.token_ids, chunk.end, seq.page_hashes)
            if chunk.start < seq.num_tokens_at_admission:
                seq.prefill_chunk_ends.append(chunk.end)
            if not chunk.is_sampled:
                seq.num_partial_chunks += 1
                continue
            token, state = next(results)
            seq.token_ids.append(token)
            seq.sampler_state = state
            if token in seq.stop_token_ids:
                self._finish(seq, "stop")
            elif seq.num_output_tokens >= seq.params.max_tokens:
                self._finish(seq, "length")
            else:
                continue
            finished.append(seq)
        return finished

    def _chunk_end(self, start: int, num_tokens: int, budget: int) -> int | None:
        """End of the next chunk: the whole rest if it fits, else page-aligned (None if empty)."""
        if num_tokens - start <= budget:
            return num_tokens
        end = (start + budget) // self.page_size * self.page_size
        return end if end > start else None

    def _reserve(self, seq: Sequence, end: int, preempted: list[str]) -> bool:
        """Make the table cover positions below ``end``, preempting the youngest; False if seq went."""
        bm = self.block_manager
        num_needed = math.ceil(end / self.page_size) - len(seq.page_table)
        while num_needed > bm.num_available_pages:
            victim = self.running[-1]
            self._preempt(victim)
            preempted.append(victim.request_id)
            if victim is seq:
                return False
        for _ in range(num_needed):
            bm.allocate(seq.page_table)
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.block_manager.release(seq.page_table)
        seq.num_computed_tokens = seq.num_cached_tokens = 0
        seq.num_preemptions += 1
        seq.status = RequestStatus.WAITING
        self.waiting.appendleft(seq)

    def _finish(self, seq: Sequence, reason: str) -> None:
        if seq.status is RequestStatus.RUNNING:
            self.running.remove(seq)
            self.block_manager.release(seq.page_table)
        elif seq.status is RequestStatus.WAITING:
            self.waiting.remove(seq)
        seq.status = RequestStatus.FINISHED
        seq.finish_reason = reason
