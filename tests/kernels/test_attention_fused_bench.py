"""bench/attention_fused.py without a GPU: its cases, and a usage error that names the bad one."""

import pytest


def test_cases_parse_fresh_and_cached_launches():
    from bench.attention_fused import cases

    assert cases("1x4096,2x128@6144") == [(1, 4096, 4096), (2, 128, 6272)]


@pytest.mark.parametrize("bad", ["1x", "x4096", "0x16", "1x16@-1", "1x2x3", "4096"])
def test_a_bad_case_is_a_usage_error_naming_it(bad, capsys):
    from bench import attention_fused

    with pytest.raises(SystemExit) as exit_info:
        attention_fused.main(["--out", "unused", "--cases", f"1x64,{bad}"])
    assert exit_info.value.code == 2
    assert repr(bad) in capsys.readouterr().err
