"""Stateful test of the scheduler and cache manager together, against a ghost logical model.

A fake model stands in for the forward: a chunk writes, into each scheduled slot, the logical
prefix of its position (the ghost), and a sampled chunk *reads* the slots of every position of
its history back from the ghost and turns what it read into a token. Any wrong reuse, overwrite
or stale page changes what is read. Scheduling (batching, chunking, reuse, preemption, queueing,
cancellation, decode steps planned ahead of the previous commit) must never change a request's
tokens: they must equal the logical sequence.
"""

import hashlib

from hypothesis import event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.block_manager import BlockManager, chain_hash
from engine.config import EngineConfig
from engine.sampling_params import SamplingParams
from engine.scheduler import Scheduler, StepPlan
from engine.sequence import Sequence

P = 4  # torch-free, no kernel runs: small pages put many page boundaries in short prompts
VOCAB = 3
# Prompts share page-aligned and unaligned prefixes so the prefix cache is exercised.
SHARED_PREFIXES = ([], [0, 1, 2, 0, 1, 2, 0, 1], [2, 2, 2, 2, 1, 1], [2, 2, 2, 2, 1, 1, 1, 1, 0])


def next_token(history: tuple[int, ...]) -> int:
    """The fake model: a token that depends on the whole history."""
    return hashlib.blake2b(repr(history).encode(), digest_size=2).digest()[0] % VOCAB


def logical_outputs(prompt: list[int], max_tokens: int, stop: frozenset[int]) -> list[int]:
    history = list(prompt)
    out: list[int] = []
    while len(out) < max_tokens:
        token = next_token(tuple(history))
        history.append(token)
        out.append(token)
        if token in stop:
            break
    return out


class SchedulerMachine(RuleBasedStateMachine):
    @initialize(num_pages=st.integers(5, 10), max_num_seqs=st.integers(1, 4),
                budget=st.integers(P, 14), caching=st.booleans(),
                collide=st.booleans())
    def setup(self, num_pages, max_num_seqs, budget, caching, collide):
        self.config = EngineConfig(page_size=P, num_pages=num_pages, max_num_seqs=max_num_seqs,
                                   max_num_batched_tokens=budget, max_model_len=num_pages * P)
        page_hash = (lambda parent, tokens: 0) if collide else chain_hash
        self.bm = BlockManager(num_pages, P, page_hash=page_hash, enable_prefix_caching=caching)
        self.scheduler = Scheduler(self.config, self.bm)
        self.ghost: dict[int, tuple[int, ...]] = {}
        self.live: dict[str, Sequence] = {}
        self.done: list[Sequence] = []
        self.num_ids = 0
        self.ahead = None  # (plan launched ahead, its sampled tokens)

    @rule(prefix=st.sampled_from(SHARED_PREFIXES), tail=st.lists(st.integers(0, VOCAB - 1), max_size=10),
          max_tokens=st.integers(1, 12), stop=st.sets(st.integers(0, VOCAB - 1), max_size=1))
    def add_request(self, prefix, tail, max_tokens, stop):
        prompt = prefix + tail
        if not prompt:
            return
        if len(prompt) + max_tokens > self.config.max_model_len:
            return
        self.num_ids += 1
        seq = Sequence(f"r{self.num_ids}", tuple(prompt), SamplingParams(max_tokens=max_tokens),
                       stop_token_ids=frozenset(stop))
        self.live[seq.request_id] = seq
        self.scheduler.add(seq)

    @rule(prompts=st.lists(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6), min_size=2, max_size=4))
    def burst(self, prompts):
        # several short prompts that decode long: decodes outgrow the reserved pages -> preemption
        for prompt in prompts:
            self.add_request([], prompt, max_tokens=12, stop=set())

    @rule(look_ahead=st.booleans())
    def step(self, look_ahead):
        if self.ahead is None:
            plan = self.scheduler.schedule()
            assert plan.num_tokens <= self.config.max_num_batched_tokens
            assert len(plan.chunks) <= self.config.max_num_seqs
            assert len({c.seq.request_id for c in plan.chunks}) == len(plan.chunks)
            for witness, seen in (("preemption", plan.preempted), ("eviction", plan.num_evicted_pages),
                                  ("prefix hit", any(c.seq.num_cached_tokens and c.start == c.seq.num_cached_tokens
                                                     for c in plan.chunks)),
                                  ("partial chunk", any(not c.is_sampled for c in plan.chunks))):
                if seen:
                    event(witness)
            tokens = self.forward(plan, {})
        else:  # launched ahead: its rows were written and read then; drop the dead ones
            (full, full_tokens), self.ahead = self.ahead, None
            live = {id(c) for c in Scheduler.live_chunks(full)}
            keep = [i for i, c in enumerate(full.chunks) if id(c) in live]
            event("step planned ahead")
            if len(keep) < len(full.chunks):
                event("dead row of a step planned ahead")
            plan = StepPlan(tuple(full.chunks[i] for i in keep), (), (), full.num_evicted_pages)
            tokens = [full_tokens[i] for i in keep]
        if look_ahead:
            # Like the engine: the next decode step runs before this one's commit, its tokens
            # being the ones this step sampled.
            ahead = self.scheduler.schedule_ahead(plan, max_num_rows=self.config.max_num_seqs)
            if ahead is not None:
                unpublished = {id(c.seq): t for c, t in zip(plan.sampled, tokens)}
                self.ahead = (ahead, self.forward(ahead, unpublished))
        sampled = [(t, c.seq.sampler_state.advanced()) for c, t in zip(plan.sampled, tokens)]
        for seq in self.scheduler.commit(plan, sampled):
            self.finish(seq)
        if self.ahead is not None and not Scheduler.live_chunks(self.ahead[0]):
            self.ahead = None

    def forward(self, plan, unpublished):
        """Write each chunk's slots and read its history back; the sampled tokens.

        ``unpublished`` maps a request to the token an uncommitted step sampled for it (a step
        launched ahead reads it on the device).
        """
        tokens = []
        for chunk in plan.chunks:
            seq = chunk.seq
            history = seq.token_ids + ([unpublished[id(seq)]] if id(seq) in unpublished else [])
            assert chunk.start == seq.num_computed_tokens + (id(seq) in unpublished) < chunk.end <= len(history)
            if not chunk.is_sampled:
                assert chunk.end % P == 0, "a partial chunk must end on a page boundary"
            for pos in range(chunk.start, chunk.end):
                page = self.bm.pages[seq.page_table[pos // P]]
                assert page.ref_count == 1 and not page.has_provenance, "write outside the private suffix"
                self.ghost[seq.slot(pos, P)] = tuple(history[:pos + 1])
            if chunk.is_sampled:
                read = [self.ghost.get(seq.slot(pos, P)) for pos in range(chunk.end)]
                assert read == [tuple(history[:pos + 1]) for pos in range(chunk.end)]
                tokens.append(next_token(read[-1]))
        return tokens

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def cancel(self, data):
        request_id = data.draw(st.sampled_from(sorted(self.live)))
        seq = self.scheduler.cancel(request_id)
        assert seq is not None and seq.finish_reason == "cancelled"
        self.finish(seq)

    @rule()
    def drain(self):
        # A bound on steps from the work left, so many queued requests are not mistaken for a
        # livelock: each step advances some request by a token, and preemption may recompute a
        # request's whole history (x4 is that margin).
        work = sum(len(s.prompt_token_ids) + s.params.max_tokens for s in self.live.values())
        for i in range(50 + 4 * work):
            if not self.scheduler.has_unfinished():
                break
            self.step(look_ahead=i % 3 != 2)
        assert not self.scheduler.has_unfinished(), "requests stopped making progress"
        assert self.bm.num_available_pages == self.config.num_pages, "pages leaked after all finished"

    def finish(self, seq):
        del self.live[seq.request_id]
        assert not seq.page_table
        expected = logical_outputs(list(seq.prompt_token_ids), seq.params.max_tokens, seq.stop_token_ids)
        got = seq.output_token_ids
        if seq.finish_reason == "cancelled":
            assert got == expected[:len(got)]
        else:
            assert got == expected
            assert seq.sampler_state.counter == len(got)

    @invariant()
    def layout_is_consistent(self):
        tables = [s.page_table for s in self.scheduler.running]
        assert self.bm.audit(tables) == []
        assert all(not s.page_table for s in self.scheduler.waiting)
        for seq in self.scheduler.running:
            assert seq.num_cached_tokens <= seq.num_computed_tokens < seq.num_tokens
            assert seq.num_computed_tokens <= len(seq.page_table) * P < seq.num_tokens + P

    @invariant()
    def retained_pages_hold_their_claimed_prefix(self):
        for page in self.bm.pages:
            if page.has_provenance:
                prefix = self.bm.prefix_tokens(page.page_id)
                for i in range(P):
                    pos = (page.depth - 1) * P + i
                    assert self.ghost.get(page.page_id * P + i) == tuple(prefix[:pos + 1])


TestSchedulerMachine = SchedulerMachine.TestCase
TestSchedulerMachine.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
