"""gpulab's model: the lab as plain Python, knowing nothing of Pulumi.

The config and its validation, the GPU catalog, pinned versions, names, networks, image references,
quantities, safe YAML and redaction. Everything else builds on it: the ComponentResources
(components/), the policy pack (policies/), and the tools on top (preview/, report/, diagnose/,
benchmarks/). Import-light on purpose: the policy pack's own venv has only pulumi-policy, pydantic
and PyYAML, so nothing here imports Pulumi, Kubernetes or Docker SDKs.
"""
