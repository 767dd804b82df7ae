"""The lab's configuration: one typed model, validated before any resource is declared.

Stack config keys (all under the `gpulab:` namespace, camelCase in YAML):

- `management`  the kind management cluster (name, Docker network, MetalLB pool size)
- `tenants`     the tenants: version, CIDRs, GPU cards by catalog model, per-pod limits, quota, workloads
- `scheduling`  HAMi placement policy and the mock-mode node-lock timeout
- `versions`    overrides of the pins in model/versions.py

Bad input raises one `pulumi.RunError` (printed without a traceback by the language host) that names
each key, the value it had and how to fix it; nothing is created because no resource was declared yet.

The package by job: `fields`, `tenant` and `lab` are the models (`lab` also holds the rules between
tenants and the rest); `errors` the message format (with secret scrubbing); `parse` and `loading`
turn a stack's keys or file into a LabConfig.
"""

from model.config.errors import PROJECT, ConfigError
from model.config.fields import MAX_POD_LIMIT, GpuCards, GpuNode, GpuQuota, NodeCards, PodLimits, SshWorker, Workload
from model.config.lab import LabConfig, Scheduling
from model.config.loading import (
    CONFIG_KEYS,
    check_secrets,
    load_config,
    load_stack_file,
    required_secrets,
    secret,
    stack_file_config,
)
from model.config.management import Install, Management
from model.config.parse import parse_config
from model.config.tenant import Tenant

__all__ = [
    "CONFIG_KEYS",
    "MAX_POD_LIMIT",
    "PROJECT",
    "ConfigError",
    "GpuCards",
    "GpuNode",
    "GpuQuota",
    "Install",
    "LabConfig",
    "Management",
    "NodeCards",
    "PodLimits",
    "Scheduling",
    "SshWorker",
    "Tenant",
    "Workload",
    "check_secrets",
    "load_config",
    "load_stack_file",
    "parse_config",
    "required_secrets",
    "secret",
    "stack_file_config",
]
