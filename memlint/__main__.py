"""``python -m memlint`` runs the command-line interface."""

from memlint.cli.main import entry

entry()
