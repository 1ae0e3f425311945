"""One request's logical history and its physical layout (torch-free).

The logical history is ``token_ids`` (prompt then produced tokens). The layout is ``page_table``:
position ``p`` lives in page ``page_table[p // page_size]`` at offset ``p % page_size``.
``num_computed_tokens`` positions have their KV written (or attached from the prefix cache).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from engine.sampling_params import SamplerState, SamplingParams

__all__ = ["RequestStatus", "Sequence"]


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False, slots=True)
class Sequence:
    """A request inside the engine: logical history, layout, sampler state and trace."""

    request_id: str
    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    stop_token_ids: frozenset[int] = frozenset()
    token_ids: list[int] = field(default_factory=list)
    sampler_state: SamplerState = field(init=False)
    status: RequestStatus = RequestStatus.WAITING
    page_table: list[int] = field(default_factory=list)
    page_hashes: list[int] = field(default_factory=list)  # chain hash of each full page, filled lazily
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # positions attached from the prefix cache at the latest admission
    finish_reason: str | None = None
    error: str | None = None  # why a request finished with reason "error"
    # Witnesses for comparison suites: reuse, chunking and preemption really happened.
    total_cached_tokens: int = 0
    num_partial_chunks: int = 0  # non-final prefill chunks: proof that chunking happened
    prefill_chunk_ends: list[int] = field(default_factory=list)  # history computed after each prefill chunk
    num_tokens_at_admission: int = 0
    num_preemptions: int = 0
    num_prompt_rows_out: int = 0  # prompt logit rows handed out so far (params.prompt_logits)
    trace: list[Any] = field(default_factory=list)  # TraceEntry or row_digests.PendingEntry per produced token

    def __post_init__(self) -> None:
        self.token_ids = list(self.prompt_token_ids)
        self.sampler_state = self.params.initial_state()

    @property
    def num_tokens(self) -> int:
        """Length of the logical history."""
        return len(self.token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        """Tokens produced so far."""
        return self.token_ids[len(self.prompt_token_ids):]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - len(self.prompt_token_ids)

    @property
    def is_finished(self) -> bool:
        return self.status is RequestStatus.FINISHED

    def slot(self, position: int, page_size: int) -> int:
        """Physical KV slot of a logical position."""
        return self.page_table[position // page_size] * page_size + position % page_size
