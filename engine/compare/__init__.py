"""The comparison protocol (DESIGN §7) and the runtime configuration checks, as evidence producers.

Entry points are in :mod:`engine.compare.api` (``run_suites``, ``runtime_checks``); the protocol is
described in ``docs/comparison-protocol.md``. Importing this package imports nothing heavy.
"""
