"""The placement engine: whether a tenant's GPU pods fit its simulated cards, as HAMi would place them (hami/ holds
HAMi's rules; this package walks pods, orders and nodes over them). Inputs: workloads, inventory, live usage;
the engine: per_pod, search, orders, evaluate, returning verdicts (verdicts.py) and wording nothing; wording.py
alone turns them into the findings and lines users read (findings.py). The policy pack and `make check`
(policies/), `make plan` (preview/), process_lab and the benchmarks use it."""
