"""``python -m assurance.cli`` runs the ``bitcase`` command (where the console script is not installed)."""

from assurance.cli.main import main

main()
