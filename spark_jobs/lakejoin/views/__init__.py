"""View kinds: each module holds the pure DataFrame logic of one kind (affected keys, recompute)."""
