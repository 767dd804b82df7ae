"""gpulab's scripts: the shell scripts the components and the Makefile run, and the Python helpers
those scripts run (join_config, gpu_readiness: `python -m scripts.NAME`; secrets_check, stack_state:
run as files by the host's python3 before the venv exists, so standard library only)."""
