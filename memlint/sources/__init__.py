"""Parsers that keep positions: Python through libcst, JSON and YAML through one loader."""
