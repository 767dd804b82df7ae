"""gpulab's model: the lab as plain Python, knowing nothing of Pulumi's SDK.

The config and its validation, the GPU catalog, pinned versions, names, networks, image references, quantities;
which stacks a checkout has (stack_file.py: standard library only, make runs it before ./venv exists); and a
deployed lab's stack outputs through the pulumi CLI (stack.py); the Kubernetes objects every wing puts in a tenant
are in kube_objects/. What it takes from outside (programs, users' YAML, redaction) it takes through boundary/,
which knows nothing of the lab; what only the Docker lab runs (Kamaji, kube-proxy, its images and sources) is in
docker_lab/, which the rest of the model does not import. Everything else builds on it: the ComponentResources
(components/), the policy pack (policies/), and the tools on top (preview/, report/, diagnose/, benchmarks/).
Import-light on purpose: the policy pack's own venv has only pulumi-policy, pydantic and PyYAML, so no module here
imports the Pulumi, Kubernetes or Docker SDKs at import time (tests/test_layout.py).
"""
