"""Config files: kinds, schema validation, and the facts each kind states about a run."""
