"""Stateful test of the cache manager against a ghost logical model.

The ghost records, for every physical KV slot, the logical prefix whose value was written there
(a KV entry is a function of the whole prefix up to its position). After every operation every
live or retained page must hold exactly the tokens of the logical prefix it claims, whatever the
hash function (including ones that force collisions).
"""

import math

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.block_manager import BlockManager, chain_hash

P = 4  # torch-free, no kernel runs: small pages put many page boundaries in short prompts
NUM_PAGES = 10

HASHES = {
    "chain": chain_hash,
    "constant": lambda parent, tokens: 1,
    "tokens_only": lambda parent, tokens: chain_hash(0, tokens),
    "parity": lambda parent, tokens: (parent + sum(tokens)) % 2,
}

token_lists = st.lists(st.integers(0, 2), min_size=1, max_size=18)


class Request:
    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens
        self.table: list[int] = []
        self.hashes: list[int] = []
        self.num_computed = 0


class CacheMachine(RuleBasedStateMachine):
    @initialize(hash_name=st.sampled_from(sorted(HASHES)))
    def setup(self, hash_name):
        self.bm = BlockManager(NUM_PAGES, P, page_hash=HASHES[hash_name])
        self.requests: list[Request] = []
        self.ghost: dict[int, tuple[int, ...]] = {}  # slot -> logical prefix written there

    @rule(tokens=token_lists)
    def admit(self, tokens):
        req = Request(tokens)
        hits = self.bm.match_prefix(tokens, req.hashes)
        assert len(hits) * P < len(tokens), "at least one position must stay uncached"
        num_new = math.ceil(len(tokens) / P) - len(hits)
        num_revived = sum(1 for pid in hits if self.bm.pages[pid].ref_count == 0)
        if num_new > self.bm.num_available_pages - num_revived:
            return
        self.bm.attach(req.table, hits)
        for _ in range(num_new):
            pid = self.bm.allocate(req.table)
            assert self.bm.pages[pid].ref_count == 1 and not self.bm.pages[pid].has_provenance
        req.num_computed = len(hits) * P
        self.requests.append(req)

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), num=st.integers(1, 9))
    def compute(self, data, num):
        req = data.draw(st.sampled_from(self.requests))
        end = min(req.num_computed + num, len(req.tokens))
        for pos in range(req.num_computed, end):
            page = self.bm.pages[req.table[pos // P]]
            # write isolation: new KV only goes to private pages without provenance
            assert page.ref_count == 1 and not page.has_provenance, f"write into shared page {page.page_id}"
            self.ghost[page.page_id * P + pos % P] = tuple(req.tokens[:pos + 1])
        req.num_computed = end
        self.bm.publish(req.table, req.tokens, end, req.hashes)

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), token=st.integers(0, 2))
    def decode(self, data, token):
        req = data.draw(st.sampled_from(self.requests))
        if req.num_computed < len(req.tokens):
            return
        if len(req.tokens) == len(req.table) * P:
            if not self.bm.num_available_pages:
                return
            self.bm.allocate(req.table)
        req.tokens.append(token)

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def release(self, data):
        req = data.draw(st.sampled_from(self.requests))
        self.requests.remove(req)
        self.bm.release(req.table)

    @invariant()
    def structure_is_consistent(self):
        assert self.bm.audit([r.table for r in self.requests]) == []

    @invariant()
    def live_pages_hold_their_requests_prefix(self):
        for req in self.requests:
            for pos in range(req.num_computed):
                slot = req.table[pos // P] * P + pos % P
                assert self.ghost.get(slot) == tuple(req.tokens[:pos + 1]), (pos, req.tokens)

    @invariant()
    def retained_pages_hold_the_prefix_they_claim(self):
        for page in self.bm.pages:
            if not page.has_provenance:
                continue
            prefix = self.bm.prefix_tokens(page.page_id)
            assert len(prefix) == page.depth * P
            for i in range(P):
                pos = (page.depth - 1) * P + i
                assert self.ghost.get(page.page_id * P + i) == tuple(prefix[:pos + 1])

    @invariant()
    def no_free_page_has_a_live_child(self):
        free = set(self.bm.free)
        for page in self.bm.pages:
            if page.has_provenance and page.parent is not None:
                assert page.parent not in free


TestCacheMachine = CacheMachine.TestCase
TestCacheMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
