"""The Docker lab's own part of the model (the wing of components/docker/), as plain data, no SDK.

Kamaji's TenantControlPlane spec and its probe (kamaji.py), a tenant's kube-proxy in place of Kamaji's addon
(kube_proxy.py), the management cluster's pull policy for Kamaji's pods (pull_policy.py), every image the lab runs
(images.py) and every source it takes from outside, with the source cache that holds them (sources.py). They stay
in the model, not in components/docker/, because preview, diagnose, hack/ and the tests read them without the
Pulumi SDK; what both wings share (a node container, the node images' contract) stays at the model's ground.
"""
