"""bench/config_sweep.py narrows its candidate lists to what the command line names, and says
what is wrong with a selection it cannot honour (exit 2, before any compile)."""

from __future__ import annotations

import pytest

from bench import config_sweep
from bench import sweep_cases as sc


@pytest.fixture(autouse=True)
def _own_candidate_lists(monkeypatch):
    # the selection narrows the module's lists in place; each test gets its own copies
    monkeypatch.setattr(sc, "MATMUL_CANDIDATES", list(sc.MATMUL_CANDIDATES))
    monkeypatch.setattr(sc, "ATTENTION_CANDIDATES", list(sc.ATTENTION_CANDIDATES))


def _select(*argv: str) -> None:
    parser = config_sweep.build_parser()
    config_sweep._select_candidates(parser.parse_args(["--out", "unused", *argv]), parser)


def test_variants_and_matmul_configs_keep_only_what_is_named():
    _select("--variants", "plan,walk", "--matmul-configs", "64,32,128,4,4;64,32,256,4,4")
    assert {c[0] for c in sc.ATTENTION_CANDIDATES} == {"plan", "walk"}
    assert sc.MATMUL_CANDIDATES == [(64, 32, 128, 4, 4), (64, 32, 256, 4, 4)]


@pytest.mark.parametrize("argv,message", [
    (["--kinds", "attention,softmax"], "--kinds: unknown ['softmax']"),
    (["--variants", "plan,nosuch"], "--variants: no candidates of ['nosuch']"),
    (["--matmul-configs", "1,2,3,4,5"], "--matmul-configs: [(1, 2, 3, 4, 5)] not among"),
])
def test_a_selection_outside_the_candidates_is_a_usage_error(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        _select(*argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_kv_lengths_parse_as_a_comma_list():
    assert config_sweep.build_parser().parse_args(["--out", "x", "--kv-len", "1024,4096,16384"]).kv_len == \
        (1024, 4096, 16384)
