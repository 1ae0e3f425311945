"""Per-category tables: grouping, latest item, witnesses, and the row cap."""

from dataclasses import replace

from assurance.render.context import MAX_TABLE_ROWS, scope_context
from assurance.render.model import EvidenceModel
from assurance.render.tables import kernel_proof_rows, runtime_check_rows, suite_rows
from tests.render.conftest import make_scope


def _ev(item_id, category, status="pass", produced_at="2026-11-01T00:00:00Z", **details):
    return EvidenceModel(item_id, category, details.pop("obligation", "obl"), status, "s", produced_at,
                         "sha256:" + "0" * 64, details=details)


def test_kernel_proofs_group_by_configuration_and_show_the_latest():
    rows = kernel_proof_rows([
        _ev("a", "kernel_proof", kernel="matmul", configuration="BM=64", time_s=1),
        _ev("b", "kernel_proof", "fail", "2026-11-02T00:00:00Z", kernel="matmul", configuration="BM=64", time_s=2),
        _ev("c", "kernel_proof", kernel="rope", config="B=32", obligations=["x", "y", "z"]),
    ])
    assert [(r.kernel, r.configuration, r.item.item_id, r.num_items) for r in rows] == [
        ("matmul", "BM=64", "b", 2), ("rope", "B=32", "c", 1)]  # the failing latest proof sorts first
    assert rows[0].time_s == "2" and rows[0].counts == {"fail": 1, "pass": 1} and rows[1].num_obligations == "3"


def test_suites_count_and_keep_failing_witnesses():
    items = [_ev(f"p{i}", "test_result", suite="batching") for i in range(3)]
    items += [_ev(f"f{i}", "test_result", "fail", suite="chunked", first_mismatch=i) for i in range(7)]
    rows = suite_rows(items)
    assert [r.suite for r in rows] == ["chunked", "batching"]
    assert rows[0].counts == {"fail": 7} and len(rows[0].witnesses) == 5 and rows[0].num_witnesses_left_out == 2
    assert rows[0].witnesses[0][1] == {"first_mismatch": "0"}


def test_tables_are_capped_with_problems_first_and_what_was_left_out_counted():
    checks = tuple(_ev(f"c{i:04d}", "runtime_config_check", "fail" if i % 100 == 0 else "pass",
                       obligation=f"check{i:04d}") for i in range(MAX_TABLE_ROWS + 50))
    scope = replace(make_scope(), evidence=checks)
    table = scope_context(scope, "n", "e")["runtime_checks"]
    assert table["total"] == MAX_TABLE_ROWS + 50 and len(table["rows"]) == MAX_TABLE_ROWS
    assert table["num_left_out"] == 50 and table["num_problems_left_out"] == 0
    assert all(not r.is_passing for r in table["rows"][:4])  # the four failing checks come first
    assert [r.item.item_id for r in runtime_check_rows(checks)][:2] == ["c0000", "c0100"]


def test_verifier_and_comparison_details_are_read():
    proof = _ev("p", "kernel_proof", kernel="embedding_kernel", configuration={"BLOCK_H": 64},
                obligations_proved=18, obligations_total=19, seconds=0.161)
    (row,) = kernel_proof_rows([proof])
    assert (row.num_obligations, row.time_s, row.configuration) == ("18/19", "0.161", '{"BLOCK_H": 64}')
    units = [_ev(f"u{i}", "test_result", suite="batch", num_comparisons=32, num_passed=32, num_failed=0,
                 suite_expected_comparisons=296, witnesses={f"w{j}": {"cached_tokens": j} for j in range(3)})
             for i in range(2)]
    (suite,) = suite_rows(units)
    assert suite.comparisons == {"num_comparisons": 64, "num_passed": 64, "num_failed": 0}
    assert suite.num_expected_comparisons == 296
    assert suite.witnesses[0][1] == {"witnesses": '{"w0": {"cached_tokens": 0}} (and 2 more)'}
