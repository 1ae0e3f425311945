"""The layout of a host slot (engine/host_logits.py): flags, tokens, input tokens, then the rows,
each view where the block's bytes say and none overlapping (checked on the CPU, the copies on a GPU
in tests/gpu/test_host_logits_gpu.py)."""

import pytest
import torch

from engine.host_logits import _Slot


@pytest.mark.parametrize("rows, vocab, flags", [(4, 1000, 37), (16, 128256, 8192), (1, 3, 1)])
def test_each_field_has_its_own_bytes_and_the_rows_come_last(rows, vocab, flags):
    sizes = dict(max_num_rows=rows, vocab_size=vocab, max_num_flags=flags)
    raw = torch.zeros(_Slot.num_bytes(**sizes), dtype=torch.uint8)
    slot = _Slot(raw, **sizes)
    slot.flags.fill_(1.5)
    slot.tokens.fill_(-2)
    slot.inputs.fill_(7)
    slot.logits.fill_(float("nan"))
    assert slot.flags.shape == (flags,) and slot.tokens.shape == slot.inputs.shape == (rows,)
    assert slot.logits.shape == (rows, vocab) and slot.logits.data_ptr() % 256 == raw.data_ptr() % 256
    assert (slot.flags == 1.5).all() and (slot.tokens == -2).all() and (slot.inputs == 7).all()
    assert slot.logits.isnan().all()
    for n in range(rows + 1):  # a step of n rows: everything it uses lies in the first used_bytes(n)
        end = raw.data_ptr() + slot.used_bytes(n)
        assert slot.logits[:n].data_ptr() + n * vocab * 4 <= end
        assert slot.inputs.data_ptr() + rows * 8 <= end
    assert slot.used_bytes(rows) == raw.numel()
