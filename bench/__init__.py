"""`make bench`: Brain's benchmarks at realistic sizes.

Each module `bench/bench_<name>.py` defines `run(report)`; it seeds what it needs into the fresh
`brain_bench` database and calls `report(name, value, unit, target=..., note=...)` per figure.
`python -m bench [name ...]` runs all (or some), prints a table and rewrites the figures table
in docs/PERFORMANCE.md."""
