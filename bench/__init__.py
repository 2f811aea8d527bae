"""raytsystem benchmark harness: `uv run python -m bench --help`.

Modules: `vocab` and `prose` (word lists, sentences), `corpus` (the deterministic synthetic
corpus), `queries` (the query set), `machine` (what the figures were measured on), `measure`
(timed subprocesses with peak memory), `cli` (raytsystem as a subprocess), `steps` (each
measurement), `run` (the whole run, in order), `profile` (cProfile by category), `report`
(targets, table, JSON).
"""
