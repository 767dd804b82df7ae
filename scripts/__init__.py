"""What the lab runs: the shell scripts the components' Commands run (their paths are in each stack's state, so
they stay here), and the Python helpers those scripts run (join_config, gpu_readiness: `python -m scripts.NAME`).
What make and CI run on the host is hack/."""
