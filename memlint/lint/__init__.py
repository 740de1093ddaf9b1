"""Linting one document: the rules run over it with its project, suppressions and fixes applied."""
