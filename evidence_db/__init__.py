"""The evidence store: bundles in, hash-chained SQL rows, read views out.

Producers write bundles with :mod:`evidence_db.bundle` (format: docs/evidence-format.md).
Everything else goes through a session from :func:`evidence_db.session.open_session`:

- :mod:`evidence_db.store` — ``ingest_records``, ``load_evidence``, ``load_details``, ``list_deployments``
- :mod:`evidence_db.ingest` — ``ingest_paths`` (bundle files and JUnit XML, as ``bitcase ingest``)
- :mod:`evidence_db.reviews` — ``add_review``, ``list_reviews``
- :mod:`evidence_db.verify` — ``verify_chain`` (as ``bitcase audit verify``)
- :mod:`evidence_db.verified_read` — ``read_verified``: the views a verdict reads, with the whole chain verified
  in the same pass
- :mod:`evidence_db.coverage` — ``in_chain``: the filter every reader applies (seq 1 to the head)
- :mod:`evidence_db.migrate` — ``upgrade``, ``ensure_store``, ``schema_drift`` (Alembic, the only schema path)

Results are the frozen views of :mod:`evidence_db.views`; errors are
:class:`~evidence_db.errors.StoreError` and :class:`~evidence_db.errors.BundleError`, both
``BitcaseError`` (exit code 2 in the CLI; :class:`~evidence_db.errors.StoreDamaged`, a row no
bitcase write could produce, exits 1).
"""
