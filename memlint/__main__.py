"""``python -m memlint`` runs the command-line interface."""

from memlint.cli import main

raise SystemExit(main())
