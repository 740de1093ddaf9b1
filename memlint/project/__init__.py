"""A project: its settings, its files, its documents, the links between them and the runs they define."""
