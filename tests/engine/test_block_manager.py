"""Prefix-cache protocol of the block manager: each acceptance check, publication and eviction rules."""

import pytest

from engine.block_manager import BlockManager, OutOfPagesError, chain_hash

P = 4  # torch-free, no kernel runs: small pages put many page boundaries in short prompts


def tokens_only_hash(parent_hash: int, tokens: tuple[int, ...]) -> int:
    """Ignores the parent: equal page tokens at any depth or after any prefix collide."""
    return chain_hash(0, tokens)


def constant_hash(parent_hash: int, tokens: tuple[int, ...]) -> int:
    return 7


def run_prefill(bm: BlockManager, token_ids: list[int]) -> tuple[list[int], list[int], int]:
    """Admit, compute the uncached rest, publish; returns (table, hash cache, cached tokens)."""
    cache: list[int] = []
    hits = bm.match_prefix(token_ids, cache)
    table: list[int] = []
    bm.attach(table, hits)
    while len(table) * P < len(token_ids):
        bm.allocate(table)
    bm.publish(table, token_ids, len(token_ids), cache)
    return table, cache, len(hits) * P


def test_reuse_of_a_published_prefix_leaves_one_position_to_compute():
    bm = BlockManager(16, P)
    donor, _, _ = run_prefill(bm, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    table, _, cached = run_prefill(bm, [1, 2, 3, 4, 5, 6, 7, 8])
    assert cached == 4  # a full-prompt hit still computes the last page
    assert table[0] == donor[0] and table[1] != donor[1]


def test_hits_need_equal_tokens_even_when_hashes_collide():
    bm = BlockManager(16, P, page_hash=constant_hash)
    run_prefill(bm, [1, 1, 1, 1, 9])
    _, _, cached = run_prefill(bm, [2, 2, 2, 2, 9])
    assert cached == 0


def test_hits_need_equal_depth():
    bm = BlockManager(16, P, page_hash=tokens_only_hash)
    run_prefill(bm, [5, 5, 5, 5, 9])  # registers [5,5,5,5] at depth 1
    # page 1 of this prompt has the same tokens and hash, but depth 2: only page 0 is reused
    table, _, cached = run_prefill(bm, [5, 5, 5, 5, 5, 5, 5, 5, 9])
    assert cached == 4 and len(set(table)) == len(table)


def test_hits_need_the_exact_parent_page():
    bm = BlockManager(16, P, page_hash=tokens_only_hash)
    run_prefill(bm, [7, 7, 7, 7, 2, 2, 2, 2, 9])  # first writer of [2,2,2,2] has parent [7,7,7,7]
    run_prefill(bm, [1, 1, 1, 1, 2, 2, 2, 2, 9])  # its [2,2,2,2] page stays unregistered
    _, _, cached = run_prefill(bm, [1, 1, 1, 1, 2, 2, 2, 2, 8])
    assert cached == 4  # page 0 hits; page 1's candidate belongs to another parent


def test_first_writer_stays_registered():
    bm = BlockManager(16, P)
    first, _, _ = run_prefill(bm, [3, 3, 3, 3, 1])
    # admitted before the first published: computes its own copy of the same page
    second: list[int] = []
    bm.allocate(second)
    bm.allocate(second)
    bm.publish(second, [3, 3, 3, 3, 1], 5, [])
    assert bm.registry[bm.pages[first[0]].hash] == first[0]
    assert bm.pages[second[0]].has_provenance  # provenance, but not indexed


def test_unpublished_pages_are_never_hits():
    bm = BlockManager(16, P)
    table: list[int] = []
    bm.allocate(table)
    bm.allocate(table)
    assert bm.match_prefix([1, 2, 3, 4, 5], []) == []


def test_eviction_takes_leaves_before_parents_and_frees_everything():
    bm = BlockManager(3, P)
    table, _, _ = run_prefill(bm, [1, 2, 3, 4, 5, 6, 7, 8, 9])  # pages: 2 published + 1 tail
    bm.release(table)
    assert bm.num_free_pages == 1 and bm.num_cached_pages == 2
    parent, child = bm.pages[0], bm.pages[1]
    assert list(bm.evictable) == [child.page_id]  # the parent has a cached child: not a leaf
    other: list[int] = []
    bm.allocate(other)  # the free tail
    bm.allocate(other)  # evicts the child first
    assert not child.has_provenance and parent.has_provenance
    bm.allocate(other)
    assert not parent.has_provenance and bm.registry == {}
    with pytest.raises(OutOfPagesError):
        bm.allocate(other)
    assert bm.audit([other]) == []


def test_disabled_prefix_caching_never_matches_or_publishes():
    bm = BlockManager(8, P, enable_prefix_caching=False)
    table, _, _ = run_prefill(bm, [1, 2, 3, 4, 5])
    assert not any(p.has_provenance for p in bm.pages)
    bm.release(table)
    assert bm.num_free_pages == 8


def test_chain_hash_is_keyed_blake2b_of_the_parent_and_the_page_tokens():
    import hashlib
    import struct

    for parent, tokens in ((0, ()), (1, (0,)), (2**64 - 1, (5, 128255, 7, 0)), (-3, tuple(range(16)))):
        h = hashlib.blake2b(digest_size=8, person=b"bitcase-pages")
        h.update(struct.pack("<Q", parent & (2**64 - 1)) + struct.pack(f"<{len(tokens)}q", *tokens))
        assert chain_hash(parent, tokens) == int.from_bytes(h.digest(), "little")


def test_a_prompt_the_cache_misses_is_hashed_only_up_to_its_first_miss():
    calls: list[tuple[int, ...]] = []

    def counting_hash(parent_hash: int, tokens: tuple[int, ...]) -> int:
        calls.append(tokens)
        return chain_hash(parent_hash, tokens)

    bm = BlockManager(16, P, page_hash=counting_hash)
    donor, _, _ = run_prefill(bm, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    calls.clear()
    cache: list[int] = []
    assert bm.match_prefix([1, 2, 3, 4, 9, 9, 9, 9, 8, 8, 8, 8, 7], cache) == donor[:1]
    assert calls == [(1, 2, 3, 4), (9, 9, 9, 9)]  # the first page hits, the second misses: stop there
    assert len(cache) == 2
