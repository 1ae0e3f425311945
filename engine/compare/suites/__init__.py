"""One module per suite: ``plan(scale, vocab_size, seed) -> list[Unit]`` and ``run(unit, ctx) -> UnitOutcome``."""
