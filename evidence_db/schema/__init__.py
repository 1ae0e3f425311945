"""Package data: the JSON Schema of bundle format v1 (``evidence-v1.json``); see ``evidence_db.validate``."""
