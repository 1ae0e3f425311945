"""Server counters and gauges in the Prometheus text format (version 0.0.4), without a client library.

Updated from the engine loop's reader thread (steps, engine state) and the HTTP handlers (requests); a lock
keeps each update whole. Names follow Prometheus conventions: ``_total`` counters, seconds.
"""

from __future__ import annotations

import threading
from collections import Counter

__all__ = ["Metrics", "STEP_BUCKETS_S"]

STEP_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    """Everything ``/metrics`` reports."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, int]] = Counter()  # (endpoint, HTTP status)
        self._finish_reasons: Counter[str] = Counter()
        self._prompt_tokens = 0
        self._generation_tokens = 0
        self._steps = 0
        self._step_seconds = 0.0
        self._step_buckets = [0] * len(STEP_BUCKETS_S)
        self._state = {"num_waiting": 0, "num_running": 0, "num_free_pages": 0, "num_pages": 0}
        self._pending = 0
        self._non_finite = 0

    def count_request(self, endpoint: str, status: int) -> None:
        with self._lock:
            self._requests[(endpoint, status)] += 1

    def count_finish(self, reason: str) -> None:
        with self._lock:
            self._finish_reasons[reason] += 1

    def count_non_finite(self) -> None:
        """A request the engine's run-time attention finiteness check ended."""
        with self._lock:
            self._non_finite += 1

    def count_prompt_tokens(self, num: int) -> None:
        with self._lock:
            self._prompt_tokens += num

    def observe_step(self, seconds: float, num_tokens: int) -> None:
        with self._lock:
            self._steps += 1
            self._generation_tokens += num_tokens
            self._step_seconds += seconds
            for i, bound in enumerate(STEP_BUCKETS_S):
                if seconds <= bound:
                    self._step_buckets[i] += 1

    def set_engine_state(self, **state: int) -> None:
        with self._lock:
            self._state.update(state)

    def set_pending(self, num: int) -> None:
        with self._lock:
            self._pending = num

    def engine_state(self) -> dict[str, int]:
        """The engine's queue and page counts as the loop last saw them."""
        with self._lock:
            return dict(self._state)

    def render(self) -> str:
        """The Prometheus text exposition."""
        with self._lock:
            lines = ["# HELP bitcase_requests_total HTTP requests answered, by endpoint and status.",
                     "# TYPE bitcase_requests_total counter"]
            lines += [f'bitcase_requests_total{{endpoint="{e}",status="{s}"}} {n}'
                      for (e, s), n in sorted(self._requests.items())]
            lines += ["# HELP bitcase_request_finish_total Engine requests finished, by finish reason.",
                      "# TYPE bitcase_request_finish_total counter"]
            lines += [f'bitcase_request_finish_total{{reason="{r}"}} {n}' for r, n in sorted(self._finish_reasons.items())]
            lines += ["# HELP bitcase_attention_non_finite_total Requests the run-time attention finiteness check "
                      "ended (finish reason error).", "# TYPE bitcase_attention_non_finite_total counter",
                      f"bitcase_attention_non_finite_total {self._non_finite}"]
            lines += ["# HELP bitcase_prompt_tokens_total Prompt tokens admitted to the engine.",
                      "# TYPE bitcase_prompt_tokens_total counter", f"bitcase_prompt_tokens_total {self._prompt_tokens}",
                      "# HELP bitcase_generation_tokens_total Tokens the engine produced.",
                      "# TYPE bitcase_generation_tokens_total counter",
                      f"bitcase_generation_tokens_total {self._generation_tokens}",
                      "# HELP bitcase_pending_requests Engine requests submitted and not finished.",
                      "# TYPE bitcase_pending_requests gauge", f"bitcase_pending_requests {self._pending}"]
            for name, help_text in (("num_waiting", "Requests queued for admission (the queue depth)."),
                                    ("num_running", "Requests admitted and running."),
                                    ("num_free_pages", "KV pages free or evictable."),
                                    ("num_pages", "KV pages in the pool.")):
                metric = f"bitcase_{name.removeprefix('num_')}"
                lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge", f"{metric} {self._state[name]}"]
            lines += ["# HELP bitcase_step_seconds Engine step time (plan, forward, sample, commit).",
                      "# TYPE bitcase_step_seconds histogram"]
            lines += [f'bitcase_step_seconds_bucket{{le="{b}"}} {n}' for b, n in zip(STEP_BUCKETS_S, self._step_buckets)]
            lines += [f'bitcase_step_seconds_bucket{{le="+Inf"}} {self._steps}',
                      f"bitcase_step_seconds_sum {self._step_seconds:.6f}", f"bitcase_step_seconds_count {self._steps}"]
        return "\n".join(lines) + "\n"
