"""`make bench`: how much a durable session costs next to a plain `query()`.

A benchmark, not a test: it prints one markdown table of medians, p95s, targets
and same-run baselines (and writes it to `bench/results/`), and it never fails on
a number. It exits non-zero only when a measurement could not be made. Everything
runs on this machine: the embedded Temporal dev server on a temporary state
directory, the real bundled Claude Code CLI, and the project's scripted Messages
API, so only our own overhead is measured. Run `python -m bench --help`.
"""
