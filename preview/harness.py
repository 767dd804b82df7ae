"""Runs the real `__main__.py` under Pulumi mocks and records everything it registers.

Used by the unit tests and by `make plan`. The mocks answer like the real providers would, with
real-shaped but assumed values (a kind network, a TenantControlPlane endpoint, kubeconfigs): no
Docker, no Pulumi CLI and no network are needed. The recording monitor keeps what the engine
would see for each resource: type, name, inputs, parent, dependencies (explicit and through
inputs), provider, and the resource options that matter for ordering and secrets. Exports are
resolved with their secret flag.
"""

from __future__ import annotations

import base64
import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "__main__.py"
KIND_KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: [{name: kind-gpulab}]\n"
KIND_RECORD = "cluster=gpulab\nnode=5f1e0c2a9b7d\nnetwork=created\nowner=gpulab.dev\n"  # scripts/kind-create.sh
UNKNOWN_ID = rpc.UNKNOWN  # the id the SDK sends for a read whose id is not known yet
DUAL_STACK_IPAM = [
    {"subnet": "fc00:f853:ccd:e793::/64", "gateway": "fc00:f853:ccd:e793::1"},
    {"subnet": "172.30.0.0/16", "gateway": "172.30.0.1"},
]


def tenant_kubeconfig(tenant: str) -> str:
    return f"apiVersion: v1\nkind: Config\nclusters: [{{name: {tenant}}}]\nusers: [{{name: admin-{tenant}}}]\n"


def process_kubeconfig(cluster: str, server: str) -> str:
    """The kubeconfig process mode's control plane returns (components/process/control_plane.py): kwokctl's, with the
    certificate files it names carried inline (assumed contents)."""
    name = f"kwok-{cluster}"
    data = {key: base64.b64encode(f"{key} of {cluster}".encode()).decode() for key in ("ca", "crt", "key")}
    return (
        f"apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {data['ca']}\n    server: {server}\n"
        f"  name: {name}\ncontexts:\n- context:\n    cluster: {name}\n    user: {name}\n  name: {name}\n"
        f"current-context: {name}\nkind: Config\nusers:\n- name: {name}\n  user:\n"
        f"    client-certificate-data: {data['crt']}\n    client-key-data: {data['key']}\n"
    )


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str = ""
    dependencies: set[str] = field(default_factory=set)
    # The resources whose outputs flow into its inputs (a subset of dependencies, which adds depends_on).
    property_dependencies: set[str] = field(default_factory=set)
    provider: str = ""
    custom: bool = True
    read_id: str = ""
    delete_before_replace: bool = False
    replace_on_changes: list[str] = field(default_factory=list)
    additional_secret_outputs: list[str] = field(default_factory=list)
    deleted_with: str = ""
    transforms: list[Any] = field(default_factory=list)
    secret_inputs: set[str] = field(default_factory=set)
    # Each alias as sent to the engine: {"urn": ...} or a spec {"name", "type", "parentUrn", "noParent"}.
    aliases: list[dict[str, Any]] = field(default_factory=list)


def unconfigured_at_preview(provider: Registration | None) -> bool:
    """True when a first preview cannot configure this provider: its inputs wait for another resource of the
    run (a tenant's kubeconfig, the kind cluster's), so the engine answers every Create behind it with `{}`."""
    return provider is not None and bool(provider.property_dependencies)


class LabMocks(pulumi.runtime.Mocks):
    """Answers like the real providers would, with real-shaped values."""

    def __init__(
        self, ipam: list[dict] | None = None, unknown_tcp_status: bool = False, first_preview: bool = False
    ) -> None:
        self.ipam = DUAL_STACK_IPAM if ipam is None else ipam
        self.unknown_tcp_status = unknown_tcp_status
        # Answer as the real engine does at a first preview (tests/real/test_engine_values.py checks it).
        self.first_preview = first_preview
        self.transforms: dict[str, list[Any]] = {}
        self.invokes: list[tuple[str, dict]] = []
        self._endpoints = 200
        self.monitor: RecordingMonitor | None = None

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        if self.first_preview and (previewed := self.previewed_outputs(args)) is not None:
            return f"{args.name}-id", previewed
        outputs = dict(args.inputs)
        if args.transforms:
            self.transforms[args.name] = list(args.transforms)
        if args.typ == "command:local:Command":
            # The kind cluster's Command prints its ownership record; the kubeconfig is read by another.
            outputs["stdout"] = ""
            if args.name.endswith("-kind"):
                outputs["stdout"] = KIND_RECORD
            elif args.name.endswith("-kind-kubeconfig"):
                outputs["stdout"] = KIND_KUBECONFIG
            outputs["stderr"] = ""
        elif args.typ == "docker:index/remoteImage:RemoteImage":
            outputs["imageId"] = "sha256:" + "ab" * 32
            outputs["repoDigest"] = args.inputs["name"]
        elif args.typ == "docker:index/container:Container":
            outputs["networkDatas"] = [{"networkName": "gpulab", "ipAddress": "172.30.0.9"}]
        elif args.typ == "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane":
            self._endpoints += 1
            name = args.inputs["metadata"]["name"]
            outputs["status"] = (
                rpc.UNKNOWN
                if self.unknown_tcp_status
                else {
                    "controlPlaneEndpoint": f"172.30.255.{self._endpoints}:6443",
                    "kubeconfig": {"admin": {"secretName": f"{name}-admin-kubeconfig"}},
                    "kubernetesResources": {"version": {"status": "Ready", "version": "v1.36.4"}},
                }
            )
        elif args.typ == "kubernetes:core/v1:Secret" and args.resource_id == UNKNOWN_ID:
            # The engine skips a read whose id is unknown (pulumi deploy/step.go); so does this mock.
            outputs["data"] = rpc.UNKNOWN
        elif args.typ == "kubernetes:core/v1:Secret" and args.resource_id:
            tenant = args.resource_id.split("/", 1)[1].removesuffix("-admin-kubeconfig")
            outputs["data"] = {"admin.conf": base64.b64encode(tenant_kubeconfig(tenant).encode()).decode()}
        elif args.typ == "pulumi-python:dynamic:Resource" and args.name.endswith("-processes"):
            # Process mode's control plane (components/process/control_plane.py) returns kwokctl's kubeconfig.
            self._endpoints += 1
            outputs["endpoint"] = f"https://127.0.0.1:{32000 + self._endpoints}"
            outputs["kubeconfig"] = process_kubeconfig(args.inputs["cluster"], outputs["endpoint"])
            outputs["hami_port"], outputs["hami_metrics_port"] = 31000 + self._endpoints, 30000 + self._endpoints
        return f"{args.name}-id", outputs

    def previewed_outputs(self, args: pulumi.runtime.MockResourceArgs) -> dict | None:
        """What a first preview's Create answers, where that is not the provider's own preview (pulumi/pulumi
        v3.274.0 pkg/resource/plugin/provider_plugin.go, Create): nothing behind a provider whose config
        waits for another resource of the run (`{}`: every output unknown); a provider that does not
        preview (gpulab's dynamic providers) has its inputs handed back, so its computed outputs are unknown.
        None: answer as the provider would."""
        provider = self.monitor.registrations.get(args.provider.rsplit("::", 1)[0]) if args.provider else None
        if unconfigured_at_preview(provider):
            return {}
        if args.typ == "pulumi-python:dynamic:Resource":
            return dict(args.inputs)
        if args.typ == "command:local:Command":
            # pulumi-command does not run a Command at preview: what it prints is not known yet.
            return {**args.inputs, "stdout": rpc.UNKNOWN, "stderr": rpc.UNKNOWN}
        return None

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        self.invokes.append((args.token, dict(args.args)))
        if args.token == "docker:index/getNetwork:getNetwork":
            return {"id": "net-id", "name": args.args["name"], "driver": "bridge", "ipamConfigs": self.ipam}
        return {}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: LabMocks) -> None:
        super().__init__(mocks)
        self.registrations: dict[str, Registration] = {}

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        property_dependencies = {urn for urns in request.propertyDependencies.values() for urn in urns.urns}
        dependencies = set(request.dependencies) | property_dependencies
        raw = rpc.deserialize_properties(request.object, keep_unknowns=True)
        if request.type.startswith("pulumi:providers:") and request.version:
            # The engine keeps a provider's version among its inputs, as the policy pack then sees them.
            raw = {**raw, "version": request.version}
        self.registrations[response.urn] = Registration(
            urn=response.urn,
            type=request.type,
            name=request.name,
            inputs=unwrap_secrets(raw),
            secret_inputs={key for key, value in raw.items() if is_secret_value(value)},
            parent=request.parent,
            dependencies=dependencies,
            property_dependencies=property_dependencies,
            provider=request.provider,
            custom=request.custom,
            delete_before_replace=request.deleteBeforeReplace,
            replace_on_changes=list(request.replaceOnChanges),
            additional_secret_outputs=list(request.additionalSecretOutputs),
            deleted_with=request.deletedWith,
            transforms=list(request.transforms),
            aliases=[alias_of(alias) for alias in request.aliases],
        )
        return response

    def ReadResource(self, request):
        response = super().ReadResource(request)
        self.registrations[response.urn] = Registration(
            urn=response.urn,
            type=request.type,
            name=request.name,
            inputs={},
            parent=request.parent,
            dependencies=set(request.dependencies),
            provider=request.provider,
            read_id=request.id,
        )
        return response


def alias_of(alias: Any) -> dict[str, Any]:
    """One alias of a RegisterResourceRequest as a plain dict (empty fields left out)."""
    if alias.WhichOneof("alias") == "urn":
        return {"urn": alias.urn}
    spec = alias.spec
    found = {"name": spec.name, "type": spec.type, "parentUrn": spec.parentUrn, "noParent": spec.noParent}
    return {key: value for key, value in found.items() if value}


def is_secret_value(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def unwrap_secrets(value: Any) -> Any:
    """Plain values for assertions; which inputs were secret is recorded separately (`secret_inputs`)."""
    if is_secret_value(value):
        return unwrap_secrets(value["value"])
    if isinstance(value, dict):
        return {key: unwrap_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(item) for item in value]
    return value


@dataclass
class Program:
    registrations: dict[str, Registration]
    exports: dict[str, Any]
    secret_exports: set[str]
    mocks: LabMocks

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations.values() if r.type == type_]

    def named(self, name: str) -> Registration:
        matches = [r for r in self.registrations.values() if r.name == name]
        assert len(matches) == 1, f"expected one resource named {name}, found {len(matches)}"
        return matches[0]

    def by_urn(self, urn: str) -> Registration:
        return self.registrations[urn]

    def provider_of(self, registration: Registration) -> Registration | None:
        """The provider resource a registration uses (its reference is `urn::id`)."""
        if not registration.provider:
            return None
        urn = registration.provider.rsplit("::", 1)[0]
        return self.registrations.get(urn)

    def direct_dependencies(self, registration: Registration) -> set[str]:
        deps = set(registration.dependencies)
        provider = self.provider_of(registration)
        if provider:
            deps.add(provider.urn)
        return deps

    def depends_on(self, later: Registration, earlier: Registration) -> bool:
        """True if `later` transitively waits for `earlier` (through inputs, depends_on or its provider)."""
        seen: set[str] = set()
        stack = list(self.direct_dependencies(later))
        while stack:
            urn = stack.pop()
            if urn == earlier.urn:
                return True
            if urn in seen or urn not in self.registrations:
                continue
            seen.add(urn)
            stack.extend(self.direct_dependencies(self.registrations[urn]))
        return False

    def closure(self, registration: Registration) -> set[str]:
        seen: set[str] = set()
        stack = list(self.direct_dependencies(registration))
        while stack:
            urn = stack.pop()
            if urn in seen or urn not in self.registrations:
                continue
            seen.add(urn)
            stack.extend(self.direct_dependencies(self.registrations[urn]))
        return seen


def run_program(
    config: dict[str, Any],
    *,
    preview: bool = False,
    mocks: LabMocks | None = None,
    secrets: dict[str, str] | None = None,
    plain: dict[str, str] | None = None,
) -> Program:
    """Evaluate __main__.py with `config` under fresh mocks; returns what it registered and exported.
    `secrets` are set as secret config values (as `pulumi config set --secret` does), `plain` as plain ones."""
    mocks = mocks or LabMocks()
    monitor = RecordingMonitor(mocks)
    mocks.monitor = monitor  # reachable even when the program raises
    settings.ROOT.set(None)  # a fresh root Stack: exports of earlier runs must not leak in
    pulumi.runtime.set_mocks(mocks, project="gpulab", stack="dev", preview=preview, monitor=monitor)
    # As the engine passes a stack file's config: a string as it is, anything else as JSON.
    values = {f"gpulab:{key}": value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}
    values |= {f"gpulab:{key}": value for key, value in {**(plain or {}), **(secrets or {})}.items()}
    pulumi.runtime.set_all_config(values, secret_keys=[f"gpulab:{key}" for key in secrets or {}])
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    # The SDK walks and formats the whole Python stack for every resource it registers (traceback.extract_stack,
    # for the engine's source positions): some 12 % of the component tests' CPU. No engine reads them here.
    stack_trace, pulumi_resource._get_stack_trace = pulumi_resource._get_stack_trace, source_pb2.StackTrace
    try:
        _sync_await(run_pulumi_func(lambda: runpy.run_path(str(MAIN), run_name="__main__")))
    finally:
        pulumi_resource._get_stack_trace = stack_trace

    root = settings.get_root_resource()
    exports: dict[str, Any] = {}
    secrets: set[str] = set()
    for name, value in (root.outputs if root else {}).items():
        output = pulumi.Output.from_input(value)
        exports[name] = _sync_await(output.future())
        if _sync_await(output.is_secret()):
            secrets.add(name)
    return Program(dict(monitor.registrations), exports, secrets, mocks)
