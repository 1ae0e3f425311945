"""The case cache: a faithful round trip, keyed by content, plan and code; never trusted blindly."""

from assurance.case_cache import cache_key, load_cached, store_cached
from assurance.case_loader import load_case
from assurance.generators import PlanItem, expand_case
from assurance.scope import BUNDLED_CASE, prepare_case

PLAN = (PlanItem("matmul", "matmul.n64_k64", "kernels/matmul.py", "sha256:1"),)


def test_round_trip_is_exact(tmp_path):
    case = expand_case(load_case(BUNDLED_CASE), PLAN, label="test")
    key = cache_key(BUNDLED_CASE, PLAN)
    store_cached(tmp_path, key, case)
    assert load_cached(tmp_path, key, BUNDLED_CASE) == case


def test_key_follows_content_and_plan(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(BUNDLED_CASE.read_text())
    key = cache_key(path, PLAN)
    assert cache_key(path, None) != key and cache_key(path, PLAN + PLAN) != key
    path.write_text(path.read_text() + "\n# edited\n")
    assert cache_key(path, PLAN) != key


def test_a_corrupt_or_foreign_entry_is_a_miss(tmp_path):
    key = cache_key(BUNDLED_CASE, PLAN)
    store_cached(tmp_path, key, load_case(BUNDLED_CASE))
    entry = next(tmp_path.glob("case-*.json"))
    entry.write_text("{not json")
    assert load_cached(tmp_path, key, BUNDLED_CASE) is None
    assert load_cached(None, key, BUNDLED_CASE) is None


def test_small_cases_are_not_cached(tmp_path):
    prepare_case(BUNDLED_CASE, deployment_fields={"kernel_plan": {"name": "t", "entries": [
        {"kernel": "matmul", "key": "matmul.a", "source_file": "kernels/matmul.py", "digest": "sha256:1"}]}},
        cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_large_case_is_parsed_once(tmp_path, monkeypatch):
    import assurance.scope

    ids = [f"sn.{i}" for i in range(1000)]
    lines = ['[case]', 'id = "big"', 'top = "G"', '[[node]]', 'id = "G"', 'kind = "goal"', 'text = "t"',
             f'supported_by = [{", ".join(repr(i).replace(chr(39), chr(34)) for i in ids)}]']
    for i in ids:
        lines += ['[[node]]', f'id = "{i}"', 'kind = "solution"', 'text = "s"', 'any_of = ["test_result"]']
    path = tmp_path / "big.toml"
    path.write_text("\n".join(lines))
    first, _ = prepare_case(path, cache_dir=tmp_path / "cache")
    monkeypatch.setattr(assurance.scope, "load_case", lambda p: (_ for _ in ()).throw(AssertionError("parsed")))
    second, _ = prepare_case(path, cache_dir=tmp_path / "cache")
    assert second == first and len(second.nodes) == 1001
