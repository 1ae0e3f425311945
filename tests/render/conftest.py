"""Report models built directly (no store, no case loader), some with hostile text."""

from __future__ import annotations

import os
import shutil

import pytest

from functools import lru_cache
from pathlib import Path

from assurance.render.model import (ComponentModel, ContractModel, EvidenceModel, NodeModel, ReportModel, ReviewModel,
                                    ScopeModel)

# Graphviz: skipped without `dot`, unless BITCASE_REQUIRE_DOT=1 makes its absence a failure.
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None and os.environ.get("BITCASE_REQUIRE_DOT") != "1",
    reason="Graphviz 'dot' is not installed (apt-get install graphviz); set BITCASE_REQUIRE_DOT=1 to fail instead")

# Text that would run, link or template itself if any layer let it through.
HOSTILE = ('</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
           '<a href="javascript:window.__pwned=3">x</a> {{ 7*7 }} {% if 1 %}jinja{% endif %} '
           '\x00\x07\u202e\ud800 ]]> <!--')
LONG = "L" * 20_000
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def _ev(item_id: str, category: str, status: str = "pass", **kw) -> EvidenceModel:
    base = dict(item_id=item_id, category=category, obligation=kw.pop("obligation", item_id),
                status=status, summary=kw.pop("summary", f"{item_id} {status}"),
                produced_at="2026-11-01T00:00:00Z", content_digest="sha256:" + "e" * 64,
                producer_tool="bitcase test", producer_version="0.1.0")
    base.update(kw)
    return EvidenceModel(**base)


@lru_cache(maxsize=1)
def bundled_components() -> tuple[tuple[ComponentModel, ...], tuple[ContractModel, ...]]:
    """The components and contracts the bundled determinism case declares."""
    from assurance.case_loader import load_case

    case = load_case(Path(__file__).resolve().parents[2] / "assurance" / "cases" / "determinism.toml")
    return (tuple(ComponentModel(c.id, c.label) for c in case.components),
            tuple(ContractModel(c.id, c.source, c.target, c.label) for c in case.contracts))


def make_scope(digest: str = D1, *, hostile: bool = False) -> ScopeModel:
    """A small determinism case: one top goal, a strategy, four solutions, two trusted items.

    Its components are the bundled case's; the nodes name theirs as the bundled case does.
    """
    text = HOSTILE if hostile else "Kernel proofs for every kernel in the sealed plan"
    nodes = (
        NodeModel("G1", "goal", "Traces agree by prefix comparability under D", "supported-under-trust",
                  source_ref="cases/determinism.toml:3", children=("S1",), context=("C1",), components=("engine",)),
        NodeModel("C1", "context", "Deployment configuration D"),
        NodeModel("S1", "strategy", "Theorem 4.1 plus induction over steps", "supported-under-trust",
                  children=("Sn-kernels", "Sn-plan", "Sn-compare", "T-triton", "T-gpu")),
        NodeModel("Sn-kernels", "solution", text, "verified", categories=("kernel_proof",),
                  evidence_ids=("proof-matmul", "proof-attn"), components=("kernels", "kernel_proof")),
        NodeModel("Sn-plan", "solution", "Launches only in the sealed plan, no autotuning",
                  "runtime-checked", categories=("runtime_config_check",), evidence_ids=("check-plan",),
                  components=("sealed_plan",)),
        NodeModel("Sn-compare", "solution", "Comparison suites agree bitwise", "tested",
                  categories=("test_result",), evidence_ids=("cmp-0", "cmp-1", "cmp-2")),
        NodeModel("T-triton", "solution", "Triton compiler preserves kernel semantics", "trusted-reviewed",
                  is_trusted=True, trust_rationale="Widely used compiler; pinned version",
                  categories=("trusted_contract_translation",), components=("triton",),
                  review=ReviewModel("accepted", reviewer="alice", decision="accept",
                                     rationale="ok", reviewed_at="2026-11-02T00:00:00Z")),
        NodeModel("T-gpu", "solution", "GPU execution is deterministic for a fixed launch",
                  "trusted-unreviewed", is_trusted=True, trust_rationale=HOSTILE if hostile else "",
                  categories=("trusted_contract_translation",), review=ReviewModel("expired"), components=("gpu",)),
    )
    evidence = (
        _ev("proof-matmul", "kernel_proof", details={"kernel": "matmul", "configuration": "BM=64,BN=64",
                                                     "verifier_version": "0.3", "num_obligations": 12,
                                                     "time_s": 1.25}),
        _ev("proof-attn", "kernel_proof", details={"kernel": "attention", "config": "BLOCK=32",
                                                   "obligations": ["a", "b"], "elapsed_s": 3.5}),
        _ev("check-plan", "runtime_config_check", summary="all launches in the sealed plan"),
        _ev("cmp-0", "test_result", details={"suite": "batching"}),
        _ev("cmp-1", "test_result", details={"suite": "batching"}),
        _ev("cmp-2", "test_result", details={"suite": "chunked-prefill", "num_chunks": 3}),
    )
    if hostile:
        evidence += (
            _ev(HOSTILE, "test_result", "fail", summary=HOSTILE + LONG, obligation=HOSTILE,
                details={"suite": HOSTILE, "first_mismatch": HOSTILE, "link": "javascript:window.__pwned=4",
                         "ok_link": "https://example.org/run/1", "counterexample": {"input": HOSTILE}},
                producer_tool=HOSTILE),
        )
    return ScopeModel(deployment_digest=digest,
                      deployment_fields={"gpu": "cpu", "torch": "2.13.0", "note": HOSTILE if hostile else "-"},
                      nodes=nodes, top_claims=("G1",), trusted_base=("T-triton", "T-gpu"),
                      evidence=evidence, components=bundled_components()[0], contracts=bundled_components()[1])


def make_model(*, hostile: bool = False, digests: tuple[str, ...] = (D1,)) -> ReportModel:
    return ReportModel(title=HOSTILE if hostile else "bitcase assurance report",
                       case_ref="determinism.toml", case_digest="sha256:" + "c" * 64,
                       store_ref="sqlite:///bitcase.db",
                       scopes=tuple(make_scope(d, hostile=hostile) for d in digests),
                       as_of="2026-11-02T00:00:00Z")


@pytest.fixture
def model() -> ReportModel:
    return make_model()


@pytest.fixture
def hostile_model() -> ReportModel:
    return make_model(hostile=True)


# --- A real store and a small case, for the CLI tests -------------------------------------------

SMALL_CASE = '''
[case]
id = "small"
title = "Small determinism case"
top = "G.top"

[[node]]
id = "G.top"
kind = "goal"
text = "Traces agree under D"
supported_by = ["S.main"]
in_context_of = ["C.d"]

[[node]]
id = "C.d"
kind = "context"
text = "Deployment configuration D"

[[node]]
id = "S.main"
kind = "strategy"
text = "Kernels proved, plan checked, GPU trusted"
supported_by = ["Sn.proof", "Sn.plan", "T.gpu"]

[[node]]
id = "Sn.proof"
kind = "solution"
text = "Kernel proof of the matmul kernel"
requires = ["kernel_proof"]

[[node]]
id = "Sn.plan"
kind = "solution"
text = "Launches only in the sealed plan"
any_of = ["runtime_config_check"]

[[node]]
id = "T.gpu"
kind = "solution"
text = "GPU execution is deterministic for a fixed launch"
trusted = true
rationale = "The accelerator is part of D"
'''


def make_record(item_id, obligation, category, status="pass", *, fields=None, details=None):
    """An evidence record under the deployment with ``fields`` (default: one CPU deployment)."""
    from evidence_db.bundle import Deployment, EvidenceRecord, Producer

    producer = Producer(tool="bitcase test", version="0.1.0", command="pytest", host="ci", accelerator="cpu",
                        started_at="2026-11-01T00:00:00Z", finished_at="2026-11-01T00:00:01Z")
    return EvidenceRecord(id=item_id, category=category, obligation=obligation, status=status,
                          summary=f"{obligation} {status}", producer=producer,
                          deployment=Deployment(fields=fields or {"accelerator": "cpu", "torch": "2.13.0"}),
                          details=details or {}, produced_at="2026-11-01T00:00:00Z")


def ingest(db_path, records):
    from evidence_db.session import open_session
    from evidence_db.store import ingest_records

    with open_session(str(db_path), write=True) as session:
        ingest_records(session=session, records=records)


@pytest.fixture
def case_file(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SMALL_CASE, encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path):
    """A migrated SQLite store holding a passing proof and runtime check under one D."""
    from evidence_db.migrate import ensure_store

    path = tmp_path / "store.db"
    ensure_store(f"sqlite:///{path}")
    ingest(path, [make_record("proof-1", "Sn.proof", "kernel_proof",
                              details={"kernel": "matmul", "configuration": "BM=64", "time_s": 0.5}),
                  make_record("check-1", "Sn.plan", "runtime_config_check")])
    return path
