"""The server's own view of overlap: how many requests it was running, sampled while a group is in flight.

A client sees only that its requests were in flight together; a server that queues them (one
slot, or a full batch) still computes each alone. Where the server exposes its running count,
the probe samples it during every group of concurrent requests and records the largest value
seen, beside the client-side overlap. Sources, tried in this order:

- llama.cpp ``/slots``: slots with ``is_processing`` true (``state`` 1 in older builds);
- a gauge in ``/metrics`` (Prometheus text): ``bitcase_running`` (bitcase serve),
  ``vllm:num_requests_running``, ``sglang:num_running_reqs``, ``llamacpp:requests_processing``
  (llama.cpp with ``--metrics``), ``tgi_batch_current_size``; label sets are summed.

Samples are taken every :data:`INTERVAL_S`: a peak shorter than that can be missed, so a largest
value of 1 (or 0, for a group answered between two samples) says the server was not seen running two
at once, not that it never did.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from probing.client import ProbeClient

__all__ = ["GAUGES", "INTERVAL_S", "Watch", "find_watch", "no_watch_witness", "running_from_metrics",
           "running_from_slots"]

GAUGES = ("bitcase_running", "vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing",
          "tgi_batch_current_size")
INTERVAL_S = 0.01
_PEEK_TIMEOUT_S = 2.0


def running_from_slots(payload: Any) -> int | None:
    """Slots processing a request, from llama.cpp's ``/slots`` answer; None if it is not a slot list."""
    if not isinstance(payload, list) or not payload or not all(isinstance(s, dict) for s in payload):
        return None
    if all("is_processing" in s for s in payload):
        return sum(s["is_processing"] is True for s in payload)
    if all("state" in s for s in payload):
        return sum(s["state"] == 1 for s in payload)
    return None


def running_from_metrics(text: str, gauge: str) -> int | None:
    """The gauge's value in Prometheus text, summed over its label sets; None if absent.

    >>> running_from_metrics('vllm:num_requests_running{model_name="m"} 3.0\\nvllm:num_requests_running_x 9\\n',
    ...                      "vllm:num_requests_running")
    3
    """
    total, seen = 0.0, False
    for line in text.splitlines():
        if not line.startswith(gauge):
            continue
        name, _, rest = line.partition(" ")
        if name.split("{", 1)[0] != gauge:
            continue
        try:
            total += float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        seen = True
    return int(total) if seen else None


@dataclass(frozen=True, slots=True)
class Watch:
    """Where the server reports its running requests: ``/slots``, or a gauge of ``/metrics``."""

    path: str
    gauge: str | None = None

    @property
    def source(self) -> str:
        """How the records name the source."""
        return f"GET {self.path}" + (f" ({self.gauge})" if self.gauge else " (slots processing)")

    async def running(self, client: ProbeClient) -> int | None:
        """One sample of the running count; None when the server did not answer it."""
        status, payload = await client.peek(client.endpoint.root + self.path, timeout_s=_PEEK_TIMEOUT_S)
        if status != 200:
            return None
        if self.gauge is None:
            return running_from_slots(payload)
        return running_from_metrics(payload, self.gauge) if isinstance(payload, str) else None

    async def sample_during(self, client: ProbeClient, work: "asyncio.Future[Any]") -> dict[str, Any]:
        """Sample until ``work`` is done; the largest running count seen and how many samples answered."""
        values: list[int] = []
        while not work.done():
            value = await self.running(client)
            if value is not None:
                values.append(value)
            await asyncio.wait([work], timeout=INTERVAL_S)
        return {"source": self.source, "samples": len(values), "max_running": max(values, default=None),
                "interval_s": INTERVAL_S, "batched": bool(values) and max(values) > 1}


async def find_watch(client: ProbeClient) -> Watch | None:
    """The first source of the module's list this server answers, or None."""
    status, payload = await client.peek(client.endpoint.root + "/slots", timeout_s=_PEEK_TIMEOUT_S)
    if status == 200 and running_from_slots(payload) is not None:
        return Watch("/slots")
    status, payload = await client.peek(client.endpoint.root + "/metrics", timeout_s=_PEEK_TIMEOUT_S)
    if status == 200 and isinstance(payload, str):
        for gauge in GAUGES:
            if running_from_metrics(payload, gauge) is not None:
                return Watch("/metrics", gauge)
    return None


def no_watch_witness() -> dict[str, Any]:
    """The server-side witness of a server that reports no running count."""
    return {"source": None, "reason": "the server exposes neither /slots nor a running-requests gauge in /metrics"}
