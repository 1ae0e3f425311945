"""Relational kernel verifier: restricted-Triton source → tile IR → relational analysis → Z3.

Public API (import the submodules; this package imports nothing heavy):

- :func:`proofs.driver.verify_kernel` — one kernel, one configuration, against its contract;
- :func:`proofs.planrun.verify_targets` — every entry of a sealed plan (or of D's plan);
- :func:`proofs.producer.verify_plan_records` — the same, as evidence records for a bundle;
- :func:`proofs.report.render_text` — a result as the human-readable report.

A VERIFIED result is a relational invariance proof under stated premises and trusted
assumptions (``proofs/trusted.py``), never a statement about numerical accuracy.
"""

VERIFIER_VERSION = "1.3"
"""Version of the verifier's rules and encoding; recorded in every kernel_proof item, and a proof
is carried to a new deployment only from the same version. 1.1: bounded index relations
(``"* < E"``), one Z3 context per verification. 1.2: a tl.dot operand demand that the value
analysis cannot discharge after merging guard regions is UNKNOWN, not REFUTED. 1.3: a 1-wide
``tl.arange`` is its one value (its lane variable had been left in the term, unbounded)."""
