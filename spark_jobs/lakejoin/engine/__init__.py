"""The batch protocol (DESIGN §2, version 2), one module per step; batch.py runs them in order."""
