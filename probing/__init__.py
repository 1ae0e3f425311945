"""Black-box probing of OpenAI-compatible inference servers (``bitcase probe``).

The probe sends the comparison protocol's scenarios to an endpoint it cannot see inside, compares
what comes back bit for bit, and writes ``test_result`` evidence under an external deployment
configuration. It imports ``evidence_db`` for the record format and never ``assurance``.
"""
