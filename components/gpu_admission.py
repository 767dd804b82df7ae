"""GpuAdmissionPolicy: the pack's per-pod GPU refusals as a ValidatingAdmissionPolicy in every tenant.

The objects and their CEL are model/kube_objects/admission_policy.py's (plain Kubernetes objects, also what process
mode's tests apply with the real kubectl); this component creates them in the tenant's API server.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from model.config import Tenant
from model.kube_objects.admission_policy import policy_objects


class GpuAdmissionPolicy(pulumi.ComponentResource):
    """A tenant's GPU admission policies and bindings, in the tenant's own API server."""

    def __init__(
        self,
        name: str,
        tenant: Tenant,
        provider: k8s.Provider,
        hami: bool = True,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpulab:index:GpuAdmissionPolicy", name, None, opts)
        created: dict[str, pulumi.Resource] = {}
        for document in policy_objects(tenant, hami):
            kind, object_name = document["kind"], document["metadata"]["name"]
            resource_class = (
                k8s.admissionregistration.v1.ValidatingAdmissionPolicy
                if kind == "ValidatingAdmissionPolicy"
                else k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding
            )
            depends = [created[object_name]] if kind.endswith("Binding") else []
            created[object_name if kind == "ValidatingAdmissionPolicy" else f"{object_name}-binding"] = resource_class(
                f"{name}-{object_name}{'-binding' if kind.endswith('Binding') else ''}",
                metadata=document["metadata"],
                spec=document["spec"],
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends),
            )
        self.register_outputs({})
