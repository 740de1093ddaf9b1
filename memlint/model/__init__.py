"""The vocabulary every layer speaks: diagnostics and fixes, values with provenance, byte units."""
