"""The ``memlint`` command line: one module per subcommand."""
