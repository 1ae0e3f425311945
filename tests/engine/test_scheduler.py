"""Scheduler rules, one at a time (torch-free): publication order, chunk alignment, queueing, preemption."""

import pytest

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


def decoding(scheduler, *seqs):
    """Admit ``seqs`` and run their prefill: the next plan is a decode step of all of them."""
    for seq in seqs:
        scheduler.add(seq)
    run_step(scheduler)
    return scheduler.schedule()


def test_a_step_planned_ahead_continues_every_request_one_position_on():
    scheduler, bm = make()
    a, b = request("a", range(1, 4), max_tokens=8), request("b", range(1, 7), max_tokens=8)
    plan = decoding(scheduler, a, b)
    free = bm.num_available_pages
    ahead = scheduler.schedule_ahead(plan, max_num_rows=4)
    assert [(c.seq, c.start, c.end, c.is_sampled) for c in ahead.chunks] == [(a, 4, 5, True), (b, 7, 8, True)]
    assert len(a.page_table) == 2 and bm.num_available_pages == free - 1  # position 4 opens a's second page
    scheduler.commit(plan, [(0, a.sampler_state.advanced()), (0, b.sampler_state.advanced())])
    assert Scheduler.live_chunks(ahead) == ahead.chunks


def test_no_step_is_planned_ahead_when_the_next_one_could_differ():
    scheduler, bm = make()
    a = request("a", range(1, 4), max_tokens=8)
    plan = decoding(scheduler, a)
    scheduler.add(request("waiting", [1, 2]))
    assert scheduler.schedule_ahead(plan, max_num_rows=4) is None  # admission comes first
    scheduler, bm = make()
    first = scheduler.schedule()
    assert scheduler.schedule_ahead(first, max_num_rows=4) is None  # nothing to plan from
    scheduler.add(request("a", range(1, 4)))
    assert scheduler.schedule_ahead(scheduler.schedule(), max_num_rows=4) is None  # a prefill step
    scheduler, _ = make()
    plan = decoding(scheduler, request("a", range(1, 4), max_tokens=2))
    assert scheduler.schedule_ahead(plan, max_num_rows=4) is None  # its commit reaches max_tokens
    scheduler, _ = make()
    plan = decoding(scheduler, request("a", range(1, 4)), request("b", range(1, 4)))
    assert scheduler.schedule_ahead(plan, max_num_rows=1) is None  # more rows than a padded step holds


def test_a_step_is_not_planned_ahead_when_it_would_need_a_preemption():
    scheduler, bm = make(num_pages=2, max_model_len=8)
    a = request("a", range(1, 4), max_tokens=4)  # decodes position 3 in one page; position 4 needs a second
    plan = decoding(scheduler, a)
    bm.allocate([])  # someone else holds the last free page
    assert scheduler.schedule_ahead(plan, max_num_rows=4) is None
    assert len(a.page_table) == 1  # nothing was allocated


def test_live_chunks_drop_finished_requests_and_refuse_a_stale_plan():
    scheduler, _ = make()
    a, b = request("a", range(1, 4), max_tokens=8), request("b", range(1, 4), max_tokens=8)
    a.stop_token_ids = frozenset({7})
    plan = decoding(scheduler, a, b)
    ahead = scheduler.schedule_ahead(plan, max_num_rows=4)
    scheduler.commit(plan, [(7, a.sampler_state.advanced()), (5, b.sampler_state.advanced())])
    assert a.finish_reason == "stop" and not a.page_table  # its page of the step ahead went back too
    assert [c.seq for c in Scheduler.live_chunks(ahead)] == [b]
    b.token_ids.append(1)  # the history moved on without the step planned ahead
    with pytest.raises(RuntimeError, match="no longer matches"):
        Scheduler.live_chunks(ahead)


def test_page_hashes_of_a_step_are_computed_ahead_of_its_commit_for_known_tokens_only():
    scheduler, bm = make(budget=8)
    seq = request("a", range(1, 15), max_tokens=8)
    scheduler.add(seq)
    plan = scheduler.schedule()  # rows 0..8: a miss hashes only the first page at admission
    assert len(seq.page_hashes) == 1
    scheduler.hash_pages(plan)
    assert seq.page_hashes == bm.page_hashes(seq.token_ids, 2, [])
    scheduler.commit(plan, [])
    assert [bm.pages[p].hash for p in seq.page_table[:2]] == seq.page_hashes  # published with them
    # a step planned ahead reads a token its history does not hold yet: that page is not hashed
    scheduler, bm = make()
    b = request("b", range(1, 7), max_tokens=8)
    plan = decoding(scheduler, b)  # b decodes position 6; its history holds positions 0..6
    ahead = scheduler.schedule_ahead(plan, max_num_rows=4)
    assert [(c.start, c.end) for c in ahead.chunks] == [(7, 8)]  # ends b's second page
    scheduler.hash_pages(ahead)
    assert len(b.page_hashes) == 1
    scheduler.commit(plan, [(5, b.sampler_state.advanced())])
    scheduler.hash_pages(ahead)  # once the commit appended position 7's token
    assert b.page_hashes == bm.page_hashes([1, 2, 3, 4, 5, 6, 0, 5], 2, [])
