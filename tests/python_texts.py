"""Helpers for tests that parse Python texts as the language server does, version after version."""

from __future__ import annotations

import ast

import libcst as cst

from memlint.python import source as python_source


def parses(text: str) -> bool:
    """Do both CPython and libcst accept ``text`` (a state an edit sequence may stop at)?"""
    try:
        ast.parse(text)
        cst.parse_module(text)
    except (SyntaxError, cst.ParserSyntaxError):
        return False
    return True


def source_of(text: str, previous: python_source.PythonSource | None = None) -> python_source.PythonSource:
    """``text`` parsed (from ``previous``'s statements when given), which must be valid."""
    source = python_source.parse(text, previous)
    assert isinstance(source, python_source.PythonSource), source
    return source
