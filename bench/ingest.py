"""Benchmark the evidence store: ingest 100,000 realistic items into a fresh SQLite file, then verify.

    python bench/ingest.py [--items 100000] [--runs 3] [--signed]

Writes one JSONL bundle (not timed; with --signed, also its detached signature by a fresh
key, which the runs trust and require: `ingest --require-signed`, so the signature, the
file digest and every record against the signed records digest are checked, and the
signature is stored and linked to every item), then for each run, in a fresh process and a fresh store:
times ``ingest_paths`` (parse, validate, digest, insert, commit: what ``bitcase ingest`` does
after start-up) and ``verify_chain`` (what ``bitcase audit verify`` does), wall clock and CPU
time (the ingest's CPU time includes its worker process, which prepares records while the
main process inserts), and reads the peak resident memory of each process. Prints each run
and the medians, with the load average (other work on the machine slows the wall-clock
figures, not the CPU ones).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, Subject, write_bundle
from evidence_db.canonical import sha256_digest

KERNELS = ("embedding", "rmsnorm", "matmul", "rope", "paged_attention", "silu_mul", "residual_add", "logits")


def _deployment() -> Deployment:
    plan = [{"kernel": k, "config": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2},
             "digest": sha256_digest(k.encode())} for k in KERNELS]
    return Deployment({
        "weights_digest": sha256_digest(b"weights"), "dtype": "bfloat16", "accum_dtype": "float32",
        "gpu": "NVIDIA H200", "driver": "560.35.03", "cuda": "12.6", "torch": "2.13.0", "triton": "3.6.0",
        "cpu_threads": 16, "page_size": 16, "max_num_seqs": 64, "max_num_batched_tokens": 4096,
        "kernel_plan": plan,
    })


def make_records(num_items: int, seed: int = 0) -> list[EvidenceRecord]:
    """A mix of the four categories, shaped like what the producers emit."""
    rng = random.Random(seed)
    deployment = _deployment()
    producers = [Producer(tool=tool, version="0.1.0", command=f"{tool} --suite full", host="gpu-node-3",
                          accelerator="NVIDIA H200", started_at="2025-06-01T10:00:00.000000Z",
                          finished_at="2025-06-01T11:30:00.000000Z")
                 for tool in ("bitcase verify", "bitcase compare", "bitcase check-config", "pytest")]
    categories = ("kernel_proof", "test_result", "runtime_config_check", "trusted_contract_translation")
    records = []
    for i in range(num_items):
        kind = i % 4
        kernel = KERNELS[i % len(KERNELS)]
        subjects = tuple(Subject(f"code:kernels/{k}.py", sha256_digest(k.encode())) for k in (kernel, "plan"))
        if kind == 0:
            details = {"kernel": kernel, "config": {"BLOCK_M": 64, "BLOCK_N": 64}, "verifier": "0.1.0",
                       "solver_s": round(rng.uniform(0.1, 30), 3), "obligations_discharged": rng.randint(10, 400)}
        elif kind == 1:
            details = {"suite": "batching", "prompt_len": rng.randint(1, 2048), "group": rng.choice((2, 4, 8)),
                       "order": rng.choice(("forward", "reversed", "shuffled")), "max_abs_diff": 0.0,
                       "first_mismatch": None, "logits_digest": sha256_digest(str(i).encode())}
        elif kind == 2:
            details = {"check": "launch_in_sealed_plan", "kernel": kernel, "launches": rng.randint(1, 10**6)}
        else:
            details = {"rationale": "Triton compiler lowers the verified tile program faithfully", "item": kernel}
        records.append(EvidenceRecord(
            id=f"{categories[kind]}:{kernel}:{i:07d}", category=categories[kind], obligation=f"G{i % 37}",
            status="pass" if rng.random() > 0.02 else "fail", summary=f"{categories[kind]} for {kernel} #{i}",
            producer=producers[kind], deployment=deployment, subjects=subjects, details=details,
            produced_at="2025-06-01T10:15:00.000000Z"))
    return records


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the ingest's worker)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def run_once(bundle: Path, db_file: Path) -> dict[str, float]:
    """One measured run in this process: fresh store, ingest the bundle, verify the chain (and signatures)."""
    from evidence_db.ingest import SignaturePolicy, ingest_paths
    from evidence_db.keyring import keyring_from_env
    from evidence_db.migrate import upgrade
    from evidence_db.session import open_session
    from evidence_db.verify import verify_chain

    url = f"sqlite:///{db_file}"
    upgrade(url)
    start, start_cpu, start_worker_cpu = time.perf_counter(), time.process_time(), _children_cpu_s()
    policy = SignaturePolicy(keyring_from_env().trusted(), is_signed_required=os.environ.get("BITCASE_KEYS") is not None)
    with open_session(url, write=True) as session:
        [(_, result)] = ingest_paths(session=session, paths=[bundle], signed=policy)
    assert policy.is_signed_required == (result.signed_by is not None)
    ingest_s, main_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    worker_cpu_s = _children_cpu_s() - start_worker_cpu
    ingest_cpu_s = main_cpu_s + worker_cpu_s
    start, start_cpu = time.perf_counter(), time.process_time()
    with open_session(url) as session:
        report = verify_chain(session=session)
    verify_s, verify_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    assert report.is_intact and report.num_rows == result.added + (result.signed_by is not None), report
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    worker_peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"items": result.added, "ingest_s": ingest_s, "items_per_s": result.added / ingest_s,
            "ingest_cpu_s": ingest_cpu_s, "main_cpu_s": main_cpu_s, "worker_cpu_s": worker_cpu_s,
            "items_per_cpu_s": result.added / ingest_cpu_s, "verify_s": verify_s,
            "verify_cpu_s": verify_cpu_s, "peak_rss_mib": peak_kib / 1024, "worker_peak_rss_mib": worker_peak_kib / 1024,
            "load_avg_1min": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--signed", action="store_true", help="sign the bundle; the runs require and check it")
    parser.add_argument("--child", nargs=2, metavar=("BUNDLE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_once(Path(args.child[0]), Path(args.child[1]))))
        return
    with tempfile.TemporaryDirectory(prefix="bitcase-bench-") as tmp:
        bundle = Path(tmp) / "bench.jsonl"
        env = os.environ.copy()
        env.pop("BITCASE_TRUSTED_KEYS", None)
        env.pop("BITCASE_KEYS", None)
        signer = None
        if args.signed:
            from evidence_db.keyring import Keyring

            env["BITCASE_KEYS"] = str(Path(tmp) / "keys")
            ring = Keyring(Path(env["BITCASE_KEYS"]), Path(env["BITCASE_KEYS"]) / "trusted_keys")
            ring.trust(ring.generate("bench").public)
            signer = ring.signing_key("bench")
        write_bundle(bundle, make_records(args.items), signer=signer)
        print(f"bundle: {args.items} items, {bundle.stat().st_size / 2**20:.1f} MiB", file=sys.stderr)
        runs = []
        for index in range(args.runs):
            out = subprocess.run([sys.executable, __file__, "--child", str(bundle), str(Path(tmp) / f"run{index}.db")],
                                 capture_output=True, text=True, check=True, env=env)
            runs.append(json.loads(out.stdout))
            print(json.dumps(runs[-1]), file=sys.stderr)
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(f"{'signed' if args.signed else 'unsigned'} bundle ingest: {median['items_per_s']:,.0f} items/s ({median['ingest_s']:.2f} s for {int(median['items']):,} "
          f"items; {median['ingest_cpu_s']:.2f} CPU s: {median['main_cpu_s']:.2f} inserting, "
          f"{median['worker_cpu_s']:.2f} preparing in the worker; {median['items_per_cpu_s']:,.0f} items per CPU second)")
    print(f"audit verify: {median['verify_s']:.2f} s ({median['verify_cpu_s']:.2f} CPU s)")
    print(f"peak memory (RSS): {median['peak_rss_mib']:.0f} MiB (ingest worker {median['worker_peak_rss_mib']:.0f} MiB)")
    print(f"median of {args.runs} runs; 1-minute load average {median['load_avg_1min']:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
