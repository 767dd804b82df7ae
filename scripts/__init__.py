"""gpulab's scripts: the shell scripts the components and the Makefile run, and the Python helpers
those scripts run (join_config, gpu_readiness: `python -m scripts.NAME`; stack_state: run as a file by the
host's python3 before the venv exists, so standard library only; secrets_check: run the same way, it hands
the stack file to ./venv's loader, and waits for ./venv when there is none)."""
