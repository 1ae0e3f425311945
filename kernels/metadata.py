"""Index tensors: per-token attention metadata and the data premises kernels rely on.

The kernels trust their index inputs (token ids, positions, slots, block tables) to be in
range; these checks make that a runtime check when ``use_plan(..., check_metadata=True)``.
They read the tensors back to the host, so they are off for benchmarks and graph capture.
"""

from __future__ import annotations

import torch

__all__ = ["token_requests", "attention_token_metadata", "check_seq_idx", "check_every_row_sampled", "check_token_ids",
           "check_positions", "check_slots", "check_attention_metadata"]


def token_requests(query_start_loc: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """seq_idx [T] int32: the request of each query token (token ``query_start_loc[b] + i`` is b's).

    Integer ops only, on the tensor's device, without a host sync.
    """
    # query_start_loc: [B + 1] int32
    starts = query_start_loc.long()
    requests = torch.arange(starts.shape[0] - 1, device=query_start_loc.device)
    return torch.repeat_interleave(requests, starts[1:] - starts[:-1], output_size=num_tokens).to(torch.int32)


def attention_token_metadata(query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
                             num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(seq_idx, positions), both [T] int32: each query token's request and absolute position.

    Token ``query_start_loc[b] + i`` belongs to request b and sits at position
    ``seq_lens[b] - q_len_b + i``. Integer ops only, on the tensors' device, without a host sync.
    """
    # query_start_loc: [B + 1] int32; seq_lens: [B] int32
    starts = query_start_loc.long()
    q_lens = starts[1:] - starts[:-1]  # [B]
    seq_idx = token_requests(query_start_loc, num_tokens).long()  # [T]
    token = torch.arange(num_tokens, device=seq_lens.device)
    positions = (seq_lens.long() - q_lens)[seq_idx] + token - starts[:-1][seq_idx]
    return seq_idx.to(torch.int32), positions.to(torch.int32)


def _fail(what: str, detail: str, fix: str) -> None:
    raise ValueError(f"{what}: {detail}; {fix}")


def check_token_ids(token_ids: torch.Tensor, vocab_size: int) -> None:
    """Every token id is in [0, vocab_size)."""
    ids = token_ids.cpu()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        _fail("embedding token_ids", f"values span [{int(ids.min())}, {int(ids.max())}]",
              f"ids must be in [0, {vocab_size})")


def check_seq_idx(seq_idx: torch.Tensor, query_start_loc: torch.Tensor, num_tokens: int) -> None:
    """A precomputed ``seq_idx`` is what :func:`token_requests` gives for ``query_start_loc``."""
    expected = token_requests(query_start_loc, num_tokens).cpu()
    given = seq_idx.cpu()
    if given.shape != expected.shape or given.dtype != expected.dtype or not torch.equal(given, expected):
        bad = "shape or dtype" if given.shape != expected.shape or given.dtype != expected.dtype else \
            f"first wrong token {int((given != expected).nonzero()[0, 0])}"
        _fail("attention seq_idx", f"does not name each token's request ({bad})",
              "pass ops.token_requests(query_start_loc, num_tokens) or leave seq_idx out")


def check_every_row_sampled(sample_rows: torch.Tensor, num_tokens: int) -> None:
    """``sample_rows`` is 0 .. num_tokens - 1 in order (what a batch that samples every row claims)."""
    rows = sample_rows.cpu()
    if rows.shape != (num_tokens,) or not torch.equal(rows, torch.arange(num_tokens, dtype=rows.dtype)):
        _fail("forward sample_rows", f"{rows.tolist()[:8]} (first 8) for {num_tokens} tokens",
              "a batch marked is_every_row_sampled samples rows 0 .. T - 1 in order; unmark it or fix the rows")


def check_positions(positions: torch.Tensor, num_table_rows: int) -> None:
    """Every RoPE position has a row in the cos/sin table."""
    pos = positions.cpu()
    if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= num_table_rows):
        _fail("rope positions", f"values span [{int(pos.min())}, {int(pos.max())}]",
              f"the cos_sin table has {num_table_rows} rows; extend it or cap positions")


def check_slots(slot_mapping: torch.Tensor, num_slots: int) -> None:
    """Slots are distinct and inside the cache (a repeated slot would make the write order matter)."""
    slots = slot_mapping.cpu()
    if not slots.numel():
        return
    if int(slots.min()) < 0 or int(slots.max()) >= num_slots:
        _fail("rope_store_kv slot_mapping", f"values span [{int(slots.min())}, {int(slots.max())}]",
              f"slots must be in [0, {num_slots}) (page * page_size + offset)")
    if torch.unique(slots).numel() != slots.numel():
        _fail("rope_store_kv slot_mapping", "a slot appears twice", "give every token its own slot")


def check_attention_metadata(query_start_loc: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor,
                             num_tokens: int, num_pages: int, page_size: int) -> None:
    """Query offsets partition the tokens, KV lengths cover the queries, visited pages exist."""
    qsl, lens, table = query_start_loc.cpu().long(), seq_lens.cpu().long(), block_table.cpu().long()
    num_seqs = lens.shape[0]
    if query_start_loc.dtype != torch.int32 or seq_lens.dtype != torch.int32:
        _fail("paged_attention metadata", f"dtypes {query_start_loc.dtype}, {seq_lens.dtype}",
              "query_start_loc and seq_lens must be int32")
    if tuple(qsl.shape) != (num_seqs + 1,) or table.dim() != 2 or table.shape[0] != num_seqs:
        _fail("paged_attention metadata", f"shapes qsl {tuple(qsl.shape)}, seq_lens {tuple(lens.shape)}, "
              f"block_table {tuple(table.shape)}", "need [B + 1], [B] and [B, max_pages]")
    q_lens = qsl[1:] - qsl[:-1]
    if int(qsl[0]) != 0 or int(qsl[-1]) != num_tokens or bool((q_lens < 0).any()):
        _fail("paged_attention query_start_loc", f"{qsl.tolist()}",
              f"must start at 0, never decrease and end at the {num_tokens} query tokens")
    if bool((lens < q_lens).any()):
        _fail("paged_attention seq_lens", f"{lens.tolist()} shorter than query lengths {q_lens.tolist()}",
              "seq_lens counts cached plus this step's tokens")
    pages_needed = (lens + page_size - 1) // page_size
    if num_seqs and int(pages_needed.max()) > table.shape[1]:
        _fail("paged_attention block_table", f"{table.shape[1]} columns for up to {int(pages_needed.max())} pages",
              "give every request a page per page_size tokens")
    for b in range(num_seqs):
        used = table[b, : int(pages_needed[b])]
        if used.numel() and (int(used.min()) < 0 or int(used.max()) >= num_pages):
            _fail("paged_attention block_table", f"request {b} names pages {used.tolist()}",
                  f"pages must be in [0, {num_pages})")
