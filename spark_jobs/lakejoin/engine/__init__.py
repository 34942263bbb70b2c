"""The batch protocol (DESIGN §2, version 2), one module per step, run in order by `batch`:
`plan`, `changes`, the kind's rebuild (views/), `write`; `pipeline` runs a spec's views;
`repair` and `pending` are the repair ranges and the no-Spark check. Layer 5."""
