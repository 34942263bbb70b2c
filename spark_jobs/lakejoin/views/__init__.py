"""View kinds, one module each (fk_join, list_join, rekey, enrich) with the logic a batch runs
for it; spec/registry.py maps a kind to its parts. `base`, `context` and `fanout` are what kinds
share, with `joins`. Layer 4: views read through `delta` and `quality`; the engine runs them."""
