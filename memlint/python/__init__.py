"""One analysis layer for Python source, used by the fact extractors and the rules alike.
Nothing here imports or runs the code it reads.

- the tree: ``source`` (a parsed script: positions, qualified names), ``units`` (parsed one
  top-level statement at a time, so an edit reparses what it changed), ``tree`` (parents and
  children in one pass), ``node_identity``;
- names: ``scopes`` and ``unit_scopes`` (libcst's scope analysis, joined from units),
  ``references`` (what a name refers to);
- values: ``value_types``, ``values`` (what an expression evaluates to), ``options``
  (argparse options and argument dataclasses), ``conditions`` (the options a statement runs under);
- the rules' view: ``index`` and ``statement_index`` (one pass the rules share), ``syntax``,
  ``dataflow``, ``training`` (what a call does in a training script), ``loops`` (training
  loops as ordered events);
- ``library`` (the one table of library names) and ``limits`` (how far each walk goes).
"""
