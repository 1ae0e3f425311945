"""The trusted base of a kernel proof: what a VERIFIED result still takes on trust.

Each assumption has a stable id (used in evidence obligations ``trusted.<id>``), a title and a
rationale. :func:`assumptions_for` picks those a given result relies on.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrustedAssumption", "CATALOGUE", "assumptions_for"]


@dataclass(frozen=True, slots=True)
class TrustedAssumption:
    id: str
    title: str
    rationale: str


CATALOGUE = {a.id: a for a in (
    TrustedAssumption("triton-compiler", "Triton compiler determinism and faithfulness",
                      "For a fixed kernel source, constexprs, compile options (num_warps, num_stages, "
                      "input precision, fp fusion), target and Triton/ptxas versions the compiler emits one "
                      "binary whose values follow the source semantics the verifier models."),
    TrustedAssumption("gpu-execution", "GPU execution determinism",
                      "The same binary on the same GPU model and driver computes the same bits for the same "
                      "inputs at the same logical positions, whatever the other programs do."),
    TrustedAssumption("dot-position-independence", "tl.dot row/column position independence",
                      "Element (i, j) of tl.dot is a fixed function of row i of a, column j of b and acc[i, j] "
                      "with a fixed k order, independent of i, j and of other rows and columns."),
    TrustedAssumption("dot-zero-terms", "tl.dot ignores exact +0 contraction terms",
                      "A contraction term whose left operand is +0 and right operand finite does not change "
                      "any bit of tl.dot's result; with an all-+0 left operand tl.dot returns acc unchanged."),
    TrustedAssumption("reduce-position-independence", "reduction position independence",
                      "tl.sum/max/min over one axis combine that axis in a fixed tree for a fixed shape and "
                      "num_warps; the result for one position depends only on that position's lanes."),
    TrustedAssumption("masked-lane-semantics", "masked-lane semantics",
                      "Masked-off load lanes yield `other` (or are undefined when it is absent); masked-off "
                      "store lanes write nothing."),
    TrustedAssumption("host-glue", "host glue matches the contract",
                      "The wrapper launches the kernel with the contract's grid, the plan's constexprs and "
                      "arguments whose shapes, strides and contents satisfy the premises not asserted in "
                      "the wrapper; distinct pointer arguments do not alias."),
    TrustedAssumption("contract-translation", "contract translation",
                      "The kernel contract (selected region, related inputs, premises) is what the engine "
                      "relies on; tensor representations correspond to the engine's logical tensors."),
    TrustedAssumption("tensor-representation", "tensor-representation correspondence",
                      "The contract's shapes, strides and page-table views of each pointer argument denote the "
                      "engine's logical tensors."),
    TrustedAssumption("verifier-translator", "the verifier's translator",
                      "The Python-AST front end models the restricted Triton subset faithfully (constexpr folding, "
                      "integer semantics, broadcasting, loops, masks)."),
    TrustedAssumption("verifier-rules", "the verifier's rules",
                      "The pairing, backward-demand, value-analysis and identity-step rules are sound."),
    TrustedAssumption("attention-finiteness", "finiteness premises",
                      "Tensors the contract marks finite hold finite values (stale KV slots included), and, where "
                      "the contract says no_overflow, float arithmetic on finite values does not overflow; both "
                      "are unchecked at run time unless the engine checks them."),
    TrustedAssumption("grid-dependency-semantics", "programmatic dependent launch semantics",
                      "In a kernel launched with launch_pdl, tl.extra.cuda.gdc_wait() returns only after every "
                      "earlier launch on the stream has finished and its writes are visible; "
                      "gdc_launch_dependents lets the next launch start early and orders nothing. Tensors a "
                      "contract marks immutable (weights, the cos/sin table, a step's metadata, which the "
                      "engine stages before a forward's layers) are written by no launch while the plan runs."),
    TrustedAssumption("z3-solver", "Z3 and the solver encoding",
                      "Z3 answers correctly, and the integer encoding (mathematical integers with explicit "
                      "32-bit range obligations, C division) matches Triton's integer semantics."),
)}

_ALWAYS = ("triton-compiler", "gpu-execution", "host-glue", "contract-translation", "tensor-representation",
           "verifier-translator", "verifier-rules", "z3-solver")


def assumptions_for(ops: set[str], used_zero_terms: bool, finiteness: bool = False,
                    pdl: bool = False) -> list[TrustedAssumption]:
    """The assumptions a result relies on, given the op kinds in its kernel."""
    ids = list(_ALWAYS)
    if pdl:
        ids.append("grid-dependency-semantics")
    if finiteness:
        ids.append("attention-finiteness")
    if "dot" in ops:
        ids.append("dot-position-independence")
    if used_zero_terms:
        ids.append("dot-zero-terms")
    if "reduce" in ops:
        ids.append("reduce-position-independence")
    if "masked" in ops:
        ids.append("masked-lane-semantics")
    return [CATALOGUE[i] for i in ids]
