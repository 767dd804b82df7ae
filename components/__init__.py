"""gpulab components: one module per ComponentResource, plus config models and pinned versions.

Kept import-light on purpose: the policy pack and the offline checker import the config models
without pulling in the Kubernetes or Docker SDKs.
"""
