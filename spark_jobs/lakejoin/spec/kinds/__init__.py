"""One module per view kind: its parser, its schema check, its column lineage and its registry
entry (`DECLARED`), listed in spec/registry.py."""
