"""Package data: the JSON Schemas of bundle formats v2 (``evidence-v2.json``) and v1; see ``evidence_db.validate``."""
