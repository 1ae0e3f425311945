"""Pinned host slots on a GPU: what a step hands to :class:`HostLogits` (or writes into its reserved
device slot) comes back bit for bit, in every slot as the slots come round, with and without input
tokens, from strided sources too."""

import pytest
import torch

from engine.host_logits import NUM_HOST_SLOTS, HostLogits
from kernels.step_io import put_outputs, take_tokens

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

VOCAB, ROWS, FLAGS = 1000, 8, 37


def _step(seed: int, rows: int, num_flags: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    logits = torch.randn(ROWS, VOCAB, device="cuda", generator=g) * 1e4
    logits[0, 5], logits[rows - 1, 7] = float("nan"), float("-inf")  # bits, not values, must survive
    tokens = torch.randint(0, VOCAB, (ROWS,), device="cuda", generator=g)
    inputs = torch.randint(0, VOCAB, (ROWS,), device="cuda", generator=g)
    flags = (torch.rand(num_flags, device="cuda", generator=g) > 0.8).float()
    return logits, tokens, inputs, flags


def test_rows_tokens_inputs_and_flags_come_back_bitwise_in_every_slot():
    host = HostLogits(max_num_rows=ROWS, vocab_size=VOCAB, max_num_flags=64)
    for step in range(2 * NUM_HOST_SLOTS + 1):  # every slot twice
        rows, num_flags = 1 + step % ROWS, [1, FLAGS, 64][step % 3]
        logits, tokens, inputs, flags = _step(step, rows, num_flags)
        with_inputs = step % 2 == 0
        fetch = host.start(logits, tokens, rows, flags, inputs if with_inputs else None)
        got_rows, got_tokens, got_inputs, got_flags = host.wait(fetch)
        assert got_rows.shape == (rows, VOCAB) and got_rows.device.type == "cpu"
        assert torch.equal(got_rows.view(torch.int32), logits[:rows].cpu().view(torch.int32))
        assert got_tokens == tokens[:rows].tolist()
        assert got_inputs == (inputs[:rows].tolist() if with_inputs else None)
        assert torch.equal(got_flags, flags.cpu())


def test_strided_sources_are_copied_by_value():
    host = HostLogits(max_num_rows=ROWS, vocab_size=VOCAB, max_num_flags=64)
    logits, tokens, inputs, flags = _step(99, ROWS, 2 * FLAGS)
    wide = torch.stack([logits, -logits], dim=2)  # [R, V, 2]: logits[:, :, 0] has stride 2
    fetch = host.start(wide[:, :, 0], tokens, 3, flags[::2], inputs)
    got_rows, got_tokens, got_inputs, got_flags = host.wait(fetch)
    assert torch.equal(got_rows.view(torch.int32), logits[:3].cpu().view(torch.int32))
    assert got_tokens == tokens[:3].tolist() and got_inputs == inputs[:3].tolist()
    assert torch.equal(got_flags, flags[::2].cpu())


def test_a_later_step_does_not_change_rows_already_read_until_the_slot_comes_round():
    host = HostLogits(max_num_rows=ROWS, vocab_size=VOCAB, max_num_flags=64)
    first = _step(1, 4, FLAGS)
    rows, *_ = host.wait(host.start(first[0], first[1], 4, first[3]))
    for step in range(2, NUM_HOST_SLOTS + 1):  # the other slots
        later = _step(step, 4, FLAGS)
        host.wait(host.start(later[0], later[1], 4, later[3]))
    assert torch.equal(rows.view(torch.int32), first[0][:4].cpu().view(torch.int32))


def test_a_step_that_puts_its_outputs_in_the_reserved_slot_comes_back_bitwise():
    """The decode graphs' way: the step's stream writes the reserved device slot (kernels/step_io.py,
    the slot a staged device value), then :meth:`HostLogits.send` copies it to the host."""
    host = HostLogits(max_num_rows=ROWS, vocab_size=VOCAB, max_num_flags=64)
    for step in range(NUM_HOST_SLOTS + 2):  # every slot, two of them twice
        rows = 1 + step % ROWS
        logits, tokens, inputs, flags = _step(50 + step, ROWS, ROWS)
        slot = host.reserve()
        staged = torch.tensor([slot, 0], device="cuda")
        put_outputs(logits, tokens, inputs, flags, staged, host.device_slots)
        got_rows, got_tokens, got_inputs, got_flags = host.wait(host.send(slot, num_rows=rows, num_flags=rows,
                                                                          has_inputs=True))
        assert torch.equal(got_rows.view(torch.int32), logits[:rows].cpu().view(torch.int32))
        assert got_tokens == tokens[:rows].tolist() and got_inputs == inputs[:rows].tolist()
        assert torch.equal(got_flags, flags[:rows].cpu())
        taken = torch.zeros(ROWS, dtype=torch.int64, device="cuda")
        source_rows = torch.arange(ROWS - 1, -1, -1, device="cuda")
        take_tokens(taken, source_rows, torch.tensor([-1, slot], device="cuda"), host.device_slots)
        assert taken.tolist() == tokens.flip(0).tolist()  # the next step's tokens, read from this slot
