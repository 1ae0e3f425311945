"""``bitcase assure``: run every evidence producer, ingest, evaluate, render (see :mod:`.run`)."""
