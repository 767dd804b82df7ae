"""gpulab's benchmarks, each run as a module from the project folder (`venv/bin/python -m benchmarks.hami_filter`):
`make bench`, `make bench-scheduling` and the measurements docs/performance.md and docs/process-lab.md cite."""
