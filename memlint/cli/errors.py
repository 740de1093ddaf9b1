"""What every subcommand reports back: exit codes (as ruff's) and the usage error."""

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A problem with what the user asked for: exit 2 with the message."""
