"""Scheduler rules, one at a time (torch-free): publication order, chunk alignment, queueing, preemption."""

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.sampling_params import SamplingParams
from engine.scheduler import Scheduler
from engine.sequence import Sequence

P = 4  # torch-free, no kernel runs: small pages put many page boundaries in short prompts


def make(num_pages=16, max_num_seqs=4, budget=64, max_model_len=32):
    config = EngineConfig(page_size=P, num_pages=num_pages, max_num_seqs=max_num_seqs,
                          max_num_batched_tokens=budget, max_model_len=max_model_len)
    bm = BlockManager(num_pages, P)
    return Scheduler(config, bm), bm


def request(name, prompt, max_tokens=4):
    return Sequence(name, tuple(prompt), SamplingParams(max_tokens=max_tokens))


def run_step(scheduler, token=0):
    plan = scheduler.schedule()
    finished = scheduler.commit(plan, [(token, c.seq.sampler_state.advanced()) for c in plan.sampled])
    return plan, finished


def test_hits_of_a_step_are_resolved_before_its_pages_are_published():
    scheduler, _ = make()
    prompt = list(range(1, 10))
    a, b, c = request("a", prompt), request("b", prompt), request("c", prompt)
    scheduler.add(a)
    scheduler.add(b)
    plan, _ = run_step(scheduler)
    assert plan.admitted == ("a", "b") and b.num_cached_tokens == 0  # a's pages were not published yet
    scheduler.add(c)
    run_step(scheduler)
    assert c.num_cached_tokens == 8 and c.page_table[:2] == a.page_table[:2]


def test_partial_chunks_end_on_page_boundaries_and_the_last_is_sampled():
    scheduler, _ = make(budget=6)
    seq = request("a", range(1, 15))
    scheduler.add(seq)
    chunks = []
    while not seq.output_token_ids:
        chunks.extend(run_step(scheduler)[0].chunks)
    # a budget of 6 rows: 4 (aligned down), 4, then the 6-row rest as the final chunk
    assert [(c.start, c.end, c.is_sampled) for c in chunks] == [(0, 4, False), (4, 8, False), (8, 14, True)]
    assert seq.prefill_chunk_ends == [4, 8, 14] and seq.num_partial_chunks == 2


def test_admission_is_bounded_by_free_pages_and_first_come_first_served():
    scheduler, bm = make(num_pages=8)
    big, small = request("big", range(1, 30), max_tokens=2), request("small", [1])
    scheduler.add(request("first", range(100, 113), max_tokens=2))  # 4 pages reserved
    scheduler.add(big)  # needs 8 pages: waits
    scheduler.add(small)  # fits, but must not overtake big
    plan, _ = run_step(scheduler)
    assert plan.admitted == ("first",) and [s.request_id for s in scheduler.waiting] == ["big", "small"]
    while scheduler.has_unfinished():
        run_step(scheduler)
    assert bm.num_available_pages == 8


def test_max_num_seqs_limits_the_running_set():
    scheduler, _ = make(max_num_seqs=2)
    for i in range(4):
        scheduler.add(request(f"r{i}", [i + 1, 2, 3]))
    plan, _ = run_step(scheduler)
    assert len(plan.chunks) == 2 and len(scheduler.waiting) == 2


def test_a_decode_without_a_page_preempts_the_youngest_which_recomputes():
    scheduler, bm = make(num_pages=8, max_model_len=32)
    old, young = request("old", range(1, 13), max_tokens=12), request("young", range(50, 62), max_tokens=12)
    scheduler.add(old)
    scheduler.add(young)
    preempted = []
    while scheduler.has_unfinished():
        plan, _ = run_step(scheduler)
        preempted.extend(plan.preempted)
    assert preempted and set(preempted) == {"young"}
    assert young.num_preemptions >= 1 and len(young.prefill_chunk_ends) >= 2
    assert old.output_token_ids == [0] * 12 and young.output_token_ids == [0] * 12
    assert bm.num_available_pages == 8
