"""Paged KV allocation and the provenance-checked prefix cache (torch-free).

The protocol of the study's §4.1:

* A page hash only *selects* a candidate. Reuse of page ``j`` needs equal tokens, depth ``j + 1``,
  the exact physical parent already selected for page ``j - 1``, and the page not already in the
  request's table. A collision can cause a miss, never a reuse.
* The first registered page for a hash stays in the registry.
* Pages are published (given provenance) only by :meth:`BlockManager.publish`, which the scheduler
  calls after the forward; every hit of a step is resolved at admission, before that.
* A page gets provenance only if its parent has provenance, so a parent that a cached child names
  can never be recycled: only unreferenced *leaves* are evicted, children before parents.
* Matching always leaves at least one position to compute.
"""

from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict, deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

__all__ = ["PageHash", "chain_hash", "Page", "BlockManager", "OutOfPagesError"]

# (hash of the parent page's chain, or 0 for the first page; this page's tokens) -> chain hash
PageHash = Callable[[int, tuple[int, ...]], int]


_PAGE_HASH_BASE = hashlib.blake2b(digest_size=8, person=b"bitcase-pages")


@lru_cache(maxsize=None)
def _page_struct(num_tokens: int) -> struct.Struct:
    return struct.Struct(f"<Q{num_tokens}q")


def chain_hash(parent_hash: int, tokens: tuple[int, ...]) -> int:
    """Default rolling page hash: 64-bit keyed BLAKE2b over the parent hash and the page tokens."""
    # A copy of the keyed state and one precompiled pack: a 16K-token prompt hashes 1,024 pages
    # at admission, before its first kernel.
    h = _PAGE_HASH_BASE.copy()
    h.update(_page_struct(len(tokens)).pack(parent_hash & (2**64 - 1), *tokens))
    return int.from_bytes(h.digest(), "little")


class OutOfPagesError(RuntimeError):
    """Raised when a page is requested and none is free or evictable (callers check first)."""


@dataclass(slots=True)
class Page:
    """One physical KV page and, once published, its provenance (hash, depth, parent, tokens)."""

    page_id: int
    ref_count: int = 0
    hash: int | None = None  # None: no provenance
    depth: int = 0  # one-based page index in the logical history it holds
    parent: int | None = None  # physical page of depth - 1 (None at depth 1)
    tokens: tuple[int, ...] = ()
    num_children: int = 0  # pages with provenance naming this one as parent

    @property
    def has_provenance(self) -> bool:
        return self.hash is not None

    def clear_provenance(self) -> None:
        self.hash, self.depth, self.parent, self.tokens, self.num_children = None, 0, None, (), 0


class BlockManager:
    """Owns every physical page: free, referenced by live tables, or cached with provenance."""

    def __init__(self, num_pages: int, page_size: int, *, page_hash: PageHash = chain_hash,
                 enable_prefix_caching: bool = True) -> None:
        self.page_size = page_size
        self.page_hash = page_hash
        self.enable_prefix_caching = enable_prefix_caching
        self.pages = [Page(i) for i in range(num_pages)]
        self.free: deque[int] = deque(range(num_pages))
        # unreferenced leaves with provenance, in eviction order; ordered so that taking the oldest
        # is O(1): a plain dict's first key is found past every slot freed before it
        self.evictable: OrderedDict[int, None] = OrderedDict()
        self.registry: dict[int, int] = {}  # chain hash -> first page published with it
        self.num_cached_pages = 0  # unreferenced pages with provenance
        self.num_evictions = 0

    @property
    def num_free_pages(self) -> int:
        return len(self.free)

    @property
    def num_available_pages(self) -> int:
        """Pages an allocation can obtain: free ones plus every unreferenced cached one.

        Every descendant of an unreferenced page is unreferenced too (a table holding a child
        holds its parent), so all of them can be evicted leaf by leaf.
        """
        return len(self.free) + self.num_cached_pages

    def page_hashes(self, token_ids: Sequence[int], num_pages: int, cache: list[int]) -> list[int]:
        """Chain hashes of the first ``num_pages`` full pages, extending the caller's ``cache``."""
        size = self.page_size
        for j in range(len(cache), num_pages):
            parent = cache[j - 1] if j else 0
            cache.append(self.page_hash(parent, tuple(token_ids[j * size:(j + 1) * size])))
        return cache

    def match_prefix(self, token_ids: Sequence[int], cache: list[int]) -> list[int]:
        """Cached pages holding a page-aligned prefix of ``token_ids`` (read-only; stops at the first miss)."""
        if not self.enable_prefix_caching:
            return []
        size = self.page_size
        max_pages = (len(token_ids) - 1) // size  # at least one position is always computed
        matched: list[int] = []
        seen: set[int] = set()
        parent: int | None = None
        for j in range(max_pages):
            # hashed page by page: a prompt the cache misses costs one hash before its first step
            candidate = self.registry.get(self.page_hashes(token_ids, j + 1, cache)[j])
            if candidate is None:
                break
            page = self.pages[candidate]
            if (page.tokens != tuple(token_ids[j * size:(j + 1) * size]) or page.depth != j + 1
                    or page.parent != parent or candidate in seen):
                break
            matched.append(candidate)
            seen.add(candidate)
            parent = candidate
        return matched

    def attach(self, table: list[int], page_ids: Iterable[int]) -> None:
        """Append matched cached pages to a (fresh) table, taking a reference on each."""
        for pid in page_ids:
            page = self.pages[pid]
            if page.ref_count == 0:
                self.num_cached_pages -= 1
                self.evictable.pop(pid, None)
            page.ref_count += 1
            table.append(pid)

    def allocate(self, table: list[int]) -> int:
        """Append one private page to ``table``, evicting a cached leaf if nothing is free."""
        if not self.free:
            self._evict_one()
        pid = self.free.popleft()
        self.pages[pid].ref_count = 1
        table.append(pid)
        return pid

    def publish(self, table: Sequence[int], token_ids: Sequence[int], num_computed: int,
                cache: list[int]) -> None:
        """Give provenance to the table's full, computed pages (called after the forward)."""
        if not self.enable_prefix_caching:
            return
        size = self.page_size
        num_full = min(num_computed // size, len(table))
        # Provenance in a live table is a prefix (a page with it names table[j - 1] as its parent,
        # which has it too, and a referenced page is never evicted), so scanning back from the
        # last full page skips the published prefix: a decode step costs O(1), not O(pages).
        first = num_full
        while first > 0 and not self.pages[table[first - 1]].has_provenance:
            first -= 1
        hashes = self.page_hashes(token_ids, num_full, cache)
        for j in range(first, num_full):
            page = self.pages[table[j]]
            if page.has_provenance:
                continue
            parent_id = table[j - 1] if j else None
            if parent_id is not None and not self.pages[parent_id].has_provenance:
                break  # why: a parent without provenance could be recycled under a cached child
            page.hash, page.depth, page.parent = hashes[j], j + 1, parent_id
            page.tokens = tuple(token_ids[j * size:(j + 1) * size])
            if parent_id is not None:
                self.pages[parent_id].num_children += 1
            self.registry.setdefault(hashes[j], page.page_id)  # the first writer stays

    def release(self, table: list[int]) -> None:
        """Drop a table's references, tail first so children become evictable before parents."""
        for pid in reversed(table):
            page = self.pages[pid]
            page.ref_count -= 1
            if page.ref_count:
                continue
            if page.has_provenance:
                self.num_cached_pages += 1
                if page.num_children == 0:
                    self.evictable[pid] = None
            else:
                self.free.append(pid)
        table.clear()

    def _evict_one(self) -> None:
        if not self.evictable:
            raise OutOfPagesError("no free page and no evictable cached page")
        pid, _ = self.evictable.popitem(last=False)
        page = self.pages[pid]
        if self.registry.get(page.hash) == pid:  # type: ignore[arg-type]
            del self.registry[page.hash]  # type: ignore[arg-type]
        if page.parent is not None:
            parent = self.pages[page.parent]
            parent.num_children -= 1
            if parent.ref_count == 0 and parent.num_children == 0:
                self.evictable[parent.page_id] = None
        page.clear_provenance()
        self.num_cached_pages -= 1
        self.num_evictions += 1
        self.free.append(pid)

    def prefix_tokens(self, pid: int) -> list[int]:
        """The logical token prefix a page with provenance claims (its ancestors' tokens, then its own)."""
        chain: list[tuple[int, ...]] = []
        cursor: int | None = pid
        while cursor is not None:
            chain.append(self.pages[cursor].tokens)
            cursor = self.pages[cursor].parent
        return [t for tokens in reversed(chain) for t in tokens]

    def audit(self, tables: Iterable[Sequence[int]]) -> list[str]:
        """Every inconsistency between pages, free list, cache, registry and the live tables."""
        problems: list[str] = []
        refs = [0] * len(self.pages)
        for table in tables:
            if len(set(table)) != len(table):
                problems.append(f"a table holds a page twice: {list(table)}")
            for pid in table:
                refs[pid] += 1
        free = set(self.free)
        if len(free) != len(self.free):
            problems.append("the free list holds a page twice")
        children = [0] * len(self.pages)
        for page in self.pages:
            if page.has_provenance and page.parent is not None:
                children[page.parent] += 1
        for page in self.pages:
            pid = page.page_id
            if page.ref_count != refs[pid]:
                problems.append(f"page {pid}: ref_count {page.ref_count} but {refs[pid]} live table(s) hold it")
            if pid in free and (page.ref_count or page.has_provenance):
                problems.append(f"page {pid} is free but referenced or cached")
            if pid not in free and not page.ref_count and not page.has_provenance:
                problems.append(f"page {pid} is lost: unreferenced, uncached and not free")
            is_leaf = page.has_provenance and page.ref_count == 0 and page.num_children == 0
            if is_leaf != (pid in self.evictable):
                problems.append(f"page {pid}: evictable-leaf set disagrees (leaf={is_leaf})")
            if page.num_children != children[pid]:
                problems.append(f"page {pid}: num_children {page.num_children}, actual {children[pid]}")
            if page.has_provenance:
                if len(page.tokens) != self.page_size:
                    problems.append(f"page {pid}: provenance on a page that is not full")
                if (page.parent is None) != (page.depth == 1):
                    problems.append(f"page {pid}: depth {page.depth} disagrees with parent {page.parent}")
                elif page.parent is not None:
                    parent = self.pages[page.parent]
                    if not parent.has_provenance or parent.depth != page.depth - 1:
                        problems.append(f"page {pid}: parent {page.parent} lacks provenance or has the wrong depth")
        cached = sum(1 for p in self.pages if p.has_provenance and p.ref_count == 0)
        if cached != self.num_cached_pages:
            problems.append(f"num_cached_pages {self.num_cached_pages}, actual {cached}")
        for h, pid in self.registry.items():
            if self.pages[pid].hash != h:
                problems.append(f"registry entry {h:#x} points to page {pid} without that provenance")
        return problems
