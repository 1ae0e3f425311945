"""Session-wide test settings shared by every test package."""

import os

# Tests never read a developer's store or settings by accident.
os.environ.pop("BITCASE_DB", None)
os.environ.pop("DATABASE_URL", None)
