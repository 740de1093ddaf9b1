"""`memlint lsp` with the test-only fixable rule registered (see checkpointing_rule.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import checkpointing_rule  # noqa: E402,F401  (registers TST901)

from memlint.cli.main import main  # noqa: E402

raise SystemExit(main(["lsp", *sys.argv[1:]]))
