"""Check mode: the four engine invariants of the study's §4.2, checked around every step.

1. Request/layout consistency: queues and maps agree, cache lengths stay within histories, page
   tables map positions to allocated in-range pages, the plan respects the engine limits.
2. KV-value consistency: sampled live and retained pages equal, bitwise, the K/V of a cold
   recomputation of the token prefix they claim.
3. Write isolation: this step writes only private, unpublished slots at positions not yet
   computed, and every previously initialised slot (shared or not) is bitwise unchanged after it.
4. Kernel configuration consistency: the plan is the one D names, every launch of the step was
   admitted with a configuration identical to its sealed entry, in the counts the model needs,
   and the finiteness premise of the attention contract held (the K/V written and the logits
   of the step are finite) for every request the run-time finiteness check did not end
   (engine/finiteness.py): a non-finite value there means the run-time check missed it.

A violation stops the engine with a distinct exception type naming the invariant. These are
run-time checks of this execution, not proofs.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Collection, Sequence

import torch

from kernels.launch import LaunchRecord

if TYPE_CHECKING:
    from engine.llm_engine import LLMEngine
    from engine.scheduler import StepPlan

__all__ = ["InvariantViolation", "LayoutViolation", "KVValueViolation", "WriteIsolationViolation",
           "KernelConfigViolation", "InvariantChecker"]


class InvariantViolation(RuntimeError):
    """An engine invariant failed in check mode; ``invariant`` names it."""

    invariant = "engine invariant"

    def __init__(self, detail: str) -> None:
        super().__init__(f"invariant violated: {self.invariant}: {detail}")
        self.detail = detail


class LayoutViolation(InvariantViolation):
    invariant = "request/layout consistency"


class KVValueViolation(InvariantViolation):
    invariant = "KV-value consistency"


class WriteIsolationViolation(InvariantViolation):
    invariant = "write isolation"


class KernelConfigViolation(InvariantViolation):
    invariant = "kernel configuration consistency"


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)


class InvariantChecker:
    """Runs the invariants against one engine; ``before``/``after`` bracket each forward."""

    def __init__(self, engine: "LLMEngine") -> None:
        self.engine = engine
        self.page_size = engine.config.page_size
        self._cursor = 0  # rotates invariant 2 over the initialised pages
        self._protected: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._targets = torch.empty(0, dtype=torch.int64)  # slots this step writes
        self._target_owners: list[str] = []  # the request of each target slot

    # --- invariant 1 ---------------------------------------------------------------------------
    def check_layout(self, plan: "StepPlan | None" = None) -> None:
        eng, size = self.engine, self.page_size
        sched, bm, cfg = eng.scheduler, eng.block_manager, eng.config
        problems = bm.audit([s.page_table for s in sched.running])
        ids = [s.request_id for s in list(sched.waiting) + sched.running]
        if len(ids) != len(set(ids)):
            problems.append("a request is queued or running twice")
        if len(sched.running) > cfg.max_num_seqs:
            problems.append(f"{len(sched.running)} running requests exceed max_num_seqs {cfg.max_num_seqs}")
        for seq in sched.waiting:
            if seq.status.value != "waiting" or seq.page_table or seq.num_computed_tokens:
                problems.append(f"{seq.request_id}: queued but holds pages or computed positions")
        for seq in sched.running:
            if seq.status.value != "running":
                problems.append(f"{seq.request_id}: in the running set with status {seq.status.value}")
            if not seq.num_cached_tokens <= seq.num_computed_tokens < seq.num_tokens <= cfg.max_model_len:
                problems.append(f"{seq.request_id}: cached {seq.num_cached_tokens}, computed "
                                f"{seq.num_computed_tokens}, history {seq.num_tokens} out of order")
            if not seq.num_computed_tokens <= len(seq.page_table) * size <= cfg.max_pages_per_seq * size:
                problems.append(f"{seq.request_id}: {len(seq.page_table)} pages for {seq.num_computed_tokens} "
                                "computed positions")
            if any(not 0 <= pid < cfg.num_pages for pid in seq.page_table):
                problems.append(f"{seq.request_id}: page table names a page outside the pool")
        if plan is not None:
            if plan.num_tokens > cfg.max_num_batched_tokens or len(plan.chunks) > cfg.max_num_seqs:
                problems.append(f"step of {plan.num_tokens} rows / {len(plan.chunks)} requests exceeds the limits")
            for c in plan.chunks:
                if c.start != c.seq.num_computed_tokens or not c.start < c.end <= c.seq.num_tokens:
                    problems.append(f"{c.seq.request_id}: chunk [{c.start}, {c.end}) does not continue its history")
                elif len(c.seq.page_table) * size < c.end:
                    problems.append(f"{c.seq.request_id}: chunk [{c.start}, {c.end}) runs past its page table")
                elif not c.is_sampled and c.end % size:
                    problems.append(f"{c.seq.request_id}: partial chunk ends at {c.end}, not on a page boundary")
        if problems:
            raise LayoutViolation("; ".join(problems[:5]))

    # --- invariant 3 ---------------------------------------------------------------------------
    def _initialised_slots(self) -> list[int]:
        eng, size = self.engine, self.page_size
        slots = set()
        for page in eng.block_manager.pages:
            if page.has_provenance:
                slots.update(range(page.page_id * size, (page.page_id + 1) * size))
        for seq in eng.scheduler.running:
            slots.update(seq.slot(p, size) for p in range(seq.num_computed_tokens))
        return sorted(slots)

    def before_forward(self, plan: "StepPlan") -> None:
        """Invariants 1 and 3 (targets) before the forward; snapshot every initialised slot."""
        self.check_layout(plan)
        bm, size = self.engine.block_manager, self.page_size
        targets: list[int] = []
        for c in plan.chunks:
            for pos in range(c.start, c.end):
                page = bm.pages[c.seq.page_table[pos // size]]
                if page.ref_count != 1 or page.has_provenance:
                    raise WriteIsolationViolation(
                        f"{c.seq.request_id} position {pos} would write page {page.page_id} "
                        f"(references {page.ref_count}, published {page.has_provenance})")
                targets.append(c.seq.slot(pos, size))
        self._target_owners = [c.seq.request_id for c in plan.chunks for _ in range(c.start, c.end)]
        if len(set(targets)) != len(targets):
            raise WriteIsolationViolation("two rows of one step write the same slot")
        slots = self._initialised_slots()
        if set(slots) & set(targets):
            raise WriteIsolationViolation("a row would overwrite an initialised slot")
        index = torch.tensor(slots, dtype=torch.int64, device=self.engine.runner.kv.k.device)
        k, v = self._flat()
        self._protected = (index, k.index_select(1, index), v.index_select(1, index))
        self._targets = torch.tensor(targets, dtype=torch.int64, device=index.device)

    def _flat(self) -> tuple[torch.Tensor, torch.Tensor]:
        kv = self.engine.runner.kv
        layers, pages, size, heads, dim = kv.k.shape
        return kv.k.view(layers, pages * size, heads, dim), kv.v.view(layers, pages * size, heads, dim)

    # --- invariant 4 ---------------------------------------------------------------------------
    def check_launches(self, plan: "StepPlan", launches: Sequence[LaunchRecord]) -> None:
        eng = self.engine
        expected_digest = eng.deployment.fields["kernel_plan"]["digest"]
        if eng.runner.plan.digest != expected_digest:
            raise KernelConfigViolation(f"active plan {eng.runner.plan.digest} is not D's plan {expected_digest}")
        for record in launches:
            try:
                entry = eng.runner.plan.entry(record.key)
            except KeyError:
                raise KernelConfigViolation(f"launch {record.key} is not in the sealed plan") from None
            if entry.kernel != record.kernel or entry.config().launch_options() != dict(record.config):
                raise KernelConfigViolation(f"launch {record.key} ran with {record.config}, sealed "
                                            f"{entry.config().launch_options()}")
        if not plan.chunks:
            return
        # which attention form ran is a choice of speed (kernels/ops.py); either, in every layer
        expected = eng.runner.model.launches_per_forward(has_logits=bool(plan.sampled),
                                                         one_kernel_attention=any(r.kernel == "attention_prefill"
                                                                                  for r in launches))
        launched = Counter(r.kernel for r in launches)
        if launched != expected:
            raise KernelConfigViolation(f"launch counts {dict(launched)} differ from the model's {dict(expected)}")

    def check_finite(self, plan: "StepPlan", logits: torch.Tensor, failed: Collection[str] = ()) -> None:
        """The K/V this step wrote and its logits are finite, except for requests the run-time check ended."""
        k, v = self._flat()
        kept = [i for i, owner in enumerate(self._target_owners) if owner not in failed]
        targets = self._targets[torch.tensor(kept, dtype=torch.int64, device=self._targets.device)]
        rows = [i for i, c in enumerate(plan.sampled) if c.seq.request_id not in failed]
        missed = "; the run-time finiteness check flagged none of them" if self.engine.config.check_finite else ""
        for name, values in (("K", k.index_select(1, targets)), ("V", v.index_select(1, targets)),
                             ("logits", logits[rows])):
            if not bool(torch.isfinite(values).all()):
                raise KernelConfigViolation(f"premise broken: this step's {name} values are not all finite{missed}")

    def after_forward(self, plan: "StepPlan", launches: Sequence[LaunchRecord], logits: torch.Tensor,
                      failed: Collection[str] = ()) -> None:
        """Invariant 3 (nothing initialised changed) and invariant 4 after the forward (``failed``:
        requests the run-time finiteness check ended in this step)."""
        assert self._protected is not None, "after_forward without before_forward"
        index, k_before, v_before = self._protected
        self._protected = None
        k, v = self._flat()
        for name, before, now in (("K", k_before, k.index_select(1, index)), ("V", v_before, v.index_select(1, index))):
            if not torch.equal(_bits(before), _bits(now)):
                changed = (_bits(before) != _bits(now)).flatten(2).any(-1).any(0).nonzero()
                slot = int(index[int(changed[0, 0])])
                raise WriteIsolationViolation(f"initialised {name} slot {slot} (page {slot // self.page_size}) "
                                              "changed during the step")
        self.check_launches(plan, launches)
        self.check_finite(plan, logits, failed)

    # --- invariant 2 ---------------------------------------------------------------------------
    def _kv_candidates(self) -> list[tuple[int, list[int], int]]:
        """(page, claimed token prefix up to the page's last initialised slot, initialised slots)."""
        eng, size = self.engine, self.page_size
        seen: set[int] = set()
        out = []
        for seq in eng.scheduler.running:
            for j in range(-(-seq.num_computed_tokens // size)):
                pid = seq.page_table[j]
                end = min(seq.num_computed_tokens, (j + 1) * size)
                if pid not in seen:
                    seen.add(pid)
                    out.append((pid, seq.token_ids[:end], end - j * size))
        for page in eng.block_manager.pages:
            if page.has_provenance and page.page_id not in seen:
                out.append((page.page_id, eng.block_manager.prefix_tokens(page.page_id), size))
        return out

    def after_commit(self) -> None:
        """Invariant 1 after the step, and invariant 2 on the next pages of the rotation."""
        self.check_layout()
        candidates = self._kv_candidates()
        count = min(self.engine.config.check_kv_pages_per_step, len(candidates))
        kv, size = self.engine.runner.kv, self.page_size
        for i in range(count):
            pid, prefix, num_slots = candidates[(self._cursor + i) % len(candidates)]
            cold_k, cold_v = self.engine.runner.cold_kv(prefix)
            first = len(prefix) - num_slots
            for name, live, cold in (("K", kv.k, cold_k), ("V", kv.v, cold_v)):
                if not torch.equal(_bits(live[:, pid, :num_slots]), _bits(cold[:, first:first + num_slots])):
                    raise KVValueViolation(f"page {pid} ({name}, positions {first}..{len(prefix) - 1}) differs from "
                                           "a cold recomputation of its token prefix")
        self._cursor += count
