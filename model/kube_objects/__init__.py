"""The plain Kubernetes objects gpulab puts in a tenant, as dicts, the same for every wing.

The admission policy and its CEL (admission_policy.py, with what only HAMi v2.10.0 refuses in
admission_v2_10_0.py), the tenant's namespaces, quota and inventory ConfigMap (tenant_objects.py), its declared
workloads (workload_manifests.py) and gpulab's HAMi device plugin's RBAC and DaemonSet (hami_device_plugin.py).
The components create them through the SDK, process_lab/ applies them with the real kubectl, and the policy pack
and the tests read them: built here once, from the model below them.
"""
