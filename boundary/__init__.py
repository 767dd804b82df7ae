"""gpulab's boundary: where it meets what it does not control, each contact bounded, and nothing of the lab in it.

A program it runs (bounded_run.py: a deadline, then the whole process group ended), a file from an upstream site
(downloads.py), a Kubernetes API (kube_client.py: the client's keys in memory, never on disk), Pulumi's local state
(pulumi_state.py, read without the CLI), and what users write and read: their YAML, read with bounds
(safe_yaml.py), and what an error message may echo of it (redact.py). The lab's model (model/) and everything
above it use these. They import nothing of gpulab's and, when imported, only the standard library (safe_yaml
PyYAML too; kube_client takes the Kubernetes SDK when called): `make tools` and make's own scripts run them with
the host's python3 before ./venv exists (tests/test_layout.py).
"""
