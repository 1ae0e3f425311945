"""Engine configuration: every limit and choice that is part of the deployment configuration D.

Torch-free: the scheduler and the cache manager read it, and so does the CLI before any model loads.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

from engine.decode_padding import graph_batch_sizes, graph_table_widths
from engine.mixed_padding import graph_token_buckets

__all__ = ["EngineConfig", "DTYPES", "GRAPH_CAPTURE"]

DTYPES = ("float32", "bfloat16")
GRAPH_CAPTURE = ("startup", "on_demand")
_DEVICE_RE = re.compile(r"^(cpu|cuda(:\d+)?)$")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Limits and choices of one engine instance.

    ``dtype=None`` takes the checkpoint's dtype. ``num_threads`` is applied with
    ``torch.set_num_threads`` when the engine starts (CPU reductions may depend on it, so it is
    part of D). ``check_mode`` runs the four engine invariants after every step.

    ``cuda_graphs`` pads every decode-only step (one sampled row per request) to the next of
    :attr:`graph_batch_sizes` and, on CUDA, replays a CUDA graph captured at start-up for that
    size and the narrowest of :attr:`graph_table_widths` that holds the step's KV lengths; on
    the CPU, where graphs do not exist, the same padded batch runs eagerly. Padding rows read
    and write only scratch pages outside the page pool (engine/decode_padding.py). A step
    with prefill rows and no prompt logits is padded likewise, to one of
    :attr:`graph_token_buckets` rows and a batch size above its chunk count
    (engine/mixed_padding.py). The mode, the sizes, the widths and the buckets are part of D.

    ``graph_capture`` says when those graphs are captured: ``"startup"`` captures every shape
    before the first step (no step pays a capture; what serving wants), ``"on_demand"`` captures a
    shape in the first step that needs it (an engine that runs a handful of shapes starts in a
    fraction of the time; the comparison suites start hundreds of engines). Either way a step
    replays the graph of its shape, captured from the same padded forward (engine/graph_capture.py),
    so the choice changes no bit and is not part of D.

    ``overlap_decode`` (effective with ``cuda_graphs`` and outside check mode) launches the
    next decode step of greedy requests before the host reads the current one's rows
    (engine/llm_engine.py). It changes which rows share a step, never a row's inputs, so like
    check mode it is not part of D.

    ``check_finite`` runs the run-time attention finiteness check in every step
    (kernels/finiteness.py): a request whose rows break the attention contract's finiteness
    premise ends with finish reason ``"error"``. It is part of D (and of the sealed plan): a D
    that says it is on is served with it on.
    """

    page_size: int = 16
    num_pages: int = 256
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 512
    max_model_len: int = 1024
    enable_prefix_caching: bool = True
    check_mode: bool = False
    check_kv_pages_per_step: int = 2  # live pages recomputed cold per step in check mode
    keep_logit_rows: bool = True  # False keeps only a digest of each row in the trace
    device: str = "cpu"
    dtype: str | None = None
    num_threads: int = 1
    cuda_graphs: bool = False
    overlap_decode: bool = True  # with cuda_graphs: launch a greedy decode step before reading the previous one
    check_finite: bool = True  # the run-time attention finiteness check (part of D)
    graph_capture: str = "startup"  # with cuda_graphs on CUDA: "startup" or "on_demand" (not part of D)

    def __post_init__(self) -> None:
        for name in ("page_size", "num_pages", "max_num_seqs", "max_num_batched_tokens",
                     "max_model_len", "num_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"EngineConfig.{name} must be a positive integer, got {value!r}")
        if self.check_kv_pages_per_step < 0:
            raise ValueError("EngineConfig.check_kv_pages_per_step must be >= 0, "
                             f"got {self.check_kv_pages_per_step}")
        if self.max_num_batched_tokens < self.page_size:
            # A non-final prefill chunk ends on a page boundary, so a budget below one page could
            # never advance a long prompt.
            raise ValueError(f"EngineConfig.max_num_batched_tokens ({self.max_num_batched_tokens}) must be "
                             f"at least page_size ({self.page_size})")
        if self.max_pages_per_seq > self.num_pages:
            raise ValueError(f"EngineConfig.num_pages ({self.num_pages}) cannot hold one request of "
                             f"max_model_len {self.max_model_len} ({self.max_pages_per_seq} pages of "
                             f"{self.page_size}); raise num_pages or lower max_model_len")
        if not _DEVICE_RE.match(self.device):
            raise ValueError(f"EngineConfig.device {self.device!r} is not 'cpu', 'cuda' or 'cuda:N'")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(f"EngineConfig.dtype {self.dtype!r} is not one of {DTYPES}")
        if self.graph_capture not in GRAPH_CAPTURE:
            raise ValueError(f"EngineConfig.graph_capture {self.graph_capture!r} is not one of {GRAPH_CAPTURE}")
        for name in ("cuda_graphs", "overlap_decode", "check_finite"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"EngineConfig.{name} must be True or False, got {getattr(self, name)!r}")

    @property
    def max_pages_per_seq(self) -> int:
        """Pages one request of ``max_model_len`` positions occupies."""
        return math.ceil(self.max_model_len / self.page_size)

    @property
    def graph_batch_sizes(self) -> tuple[int, ...]:
        """Batch sizes decode steps are padded to when ``cuda_graphs`` is on (empty when off)."""
        return graph_batch_sizes(self.max_num_seqs) if self.cuda_graphs else ()

    @property
    def graph_table_widths(self) -> tuple[int, ...]:
        """Block-table widths (pages) decode graphs are captured for when ``cuda_graphs`` is on (empty when off)."""
        return graph_table_widths(self.max_pages_per_seq) if self.cuda_graphs else ()

    @property
    def graph_token_buckets(self) -> tuple[int, ...]:
        """Row counts mixed (prefill) steps are padded to when ``cuda_graphs`` is on (empty when off)."""
        return graph_token_buckets(self.max_num_batched_tokens, self.max_model_len) if self.cuda_graphs else ()

    @classmethod
    def from_kwargs(cls, **kwargs: object) -> "EngineConfig":
        """Build from keyword arguments, naming any unknown key and listing the known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"unknown engine option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**kwargs)  # type: ignore[arg-type]

    def limits(self) -> dict[str, object]:
        """The page size, engine limits and decode mode recorded in D (check mode and trace options
        change no value)."""
        limits: dict[str, object] = {name: getattr(self, name) for name in _LIMIT_FIELDS}
        limits["graph_batch_sizes"] = list(self.graph_batch_sizes)
        limits["graph_table_widths"] = list(self.graph_table_widths)
        limits["graph_token_buckets"] = list(self.graph_token_buckets)
        return limits


_LIMIT_FIELDS = ("page_size", "num_pages", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
                 "enable_prefix_caching", "cuda_graphs", "check_finite")
