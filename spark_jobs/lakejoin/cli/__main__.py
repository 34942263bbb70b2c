"""`python -m lakejoin.cli`: the command line."""

from lakejoin.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
