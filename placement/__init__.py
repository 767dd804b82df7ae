"""The placement engine: whether a tenant's GPU pods fit its simulated cards, as HAMi would place them (hami/ holds
HAMi's rules; this package walks pods, orders and nodes over them). Inputs: workloads, inventory, live usage;
the engine: search, orders, evaluate, returning verdicts and findings; wording.py alone turns them into what users
read. The policy pack and `make check` (policies/), `make plan` (preview/), process_lab and the benchmarks use it."""
