"""The command line (`lakejoin run|status|report|repair ...`). Layer 6."""
