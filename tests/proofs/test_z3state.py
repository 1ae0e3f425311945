"""A verification's result does not depend on what the same process verified before.

Each verification runs in its own Z3 context (proofs/z3state.py). The check: a mutant's verdict,
reason and counterexample (a Z3 model, which follows the solver's search) are the same in a new
interpreter and in this one after other verifier work.
"""

from __future__ import annotations

import json
import subprocess
import sys

import z3

from kernels.plan import REPO_ROOT
from tests.proofs.conftest import MUTANTS, verify_file

MUTANT = ("split_partial_sized_by_block", "attention_partial_kernel")
SCRIPT = f"""
import json
from tests.proofs.conftest import MUTANTS, verify_file
r = verify_file(MUTANTS / "{MUTANT[0]}.py", "{MUTANT[1]}")
print(json.dumps([r.verdict, r.reason, r.counterexample, [o.status for o in r.obligations]], default=str))
"""


def _summary(result) -> list:
    return json.loads(json.dumps([result.verdict, result.reason, result.counterexample,
                                  [o.status for o in result.obligations]], default=str))


def test_a_verdict_and_its_counterexample_do_not_depend_on_earlier_verifier_work(tiny_plan_results):
    # tiny_plan_results: the whole tiny plan already verified in this process (once a session)
    fresh = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=600, check=True)
    for name, kernel in (("head_group_collides", "gqa_attention_kernel"), ("tile_from_m", "matmul_tile_from_m")):
        verify_file(MUTANTS / f"{name}.py", kernel)
    after_other_work = _summary(verify_file(MUTANTS / f"{MUTANT[0]}.py", MUTANT[1]))
    assert after_other_work == json.loads(fresh.stdout.strip().splitlines()[-1])
    assert after_other_work[0] == "REFUTED"


def test_terms_made_before_a_verification_stay_usable_after_it():
    x = z3.Int("x")
    verify_file(MUTANTS / "tile_from_m.py", "matmul_tile_from_m")
    solver = z3.Solver()
    solver.add(x + 1 > 2, x < 3)
    assert solver.check() == z3.sat and solver.model()[x].as_long() == 2
