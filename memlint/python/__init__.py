"""One analysis layer for Python source, used by the fact extractors and the rules alike:
the libcst tree and its units, scopes, what names refer to, values, options, conditions,
the rules' index and dataflow, and one table of library names."""
