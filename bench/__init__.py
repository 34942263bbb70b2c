"""The lakejoin benchmark (issue 6): `python -m bench --help`."""
