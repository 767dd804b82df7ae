"""TC-01..TC-10: what the lab claims, checked against the live lab (`make verify`).

Each case creates its pods in a namespace of its own and removes it afterwards, even on failure.
Every wait polls a condition with a deadline and names it when it expires.
"""

from __future__ import annotations

import copy
import ipaddress
import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from model.catalog import totals
from model.docker_lab.kamaji import control_plane_namespace
from model.names import TENANT_LABEL
from model.quantity import parse_quantity
from tests.acceptance.helpers import (
    disposable_namespace,
    gpu_pod,
    hami_reasons,
    image_pull_problem,
    pod_events,
    tenants_sharing,
    wait_until,
)

CONTROL_PLANE_CONTAINERS = {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "konnectivity-server"}
ALLOCATED = "hami.io/vgpu-devices-allocated"
SHARE = {"gpumem": 20000, "gpucores": 30}


def hami_tenants(lab) -> list:
    """The tenants whose cards HAMi shares (a DRA tenant's cases are test_dra_lab.py's)."""
    return tenants_sharing(lab, "hami")


def first_tenant(lab):
    return hami_tenants(lab)[0]


def image(lab) -> str:
    return lab.config.versions.workload_image


def core(api_client) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def deployments_available(apps: client.AppsV1Api, namespace: str) -> list[str]:
    items = apps.list_namespaced_deployment(namespace).items
    assert items, f"no Deployments in {namespace}"
    return [d.metadata.name for d in items if (d.status.available_replicas or 0) < (d.spec.replicas or 1)]


def wait_running(api: client.CoreV1Api, namespace: str, name: str, timeout: float = 180):
    def running():
        pod = api.read_namespaced_pod(name, namespace)
        problem = image_pull_problem(pod)
        assert problem is None, problem  # named at once: waiting would only end in a timeout
        return pod if pod.status.phase == "Running" else None

    return wait_until(running, timeout, f"pod {namespace}/{name} to be Running")


def card_of(pod) -> str:
    return (pod.metadata.annotations or {})[ALLOCATED].split(",", 1)[0]


def quantity(value: str) -> int:
    exact = parse_quantity(value)
    assert exact.denominator == 1, f"quantity {value} is not a whole number"
    return int(exact)


def test_tc01_management_cluster_healthy(lab) -> None:
    lab.needs_containers("the kind management cluster, cert-manager, MetalLB and Kamaji")
    apps = client.AppsV1Api(lab.management)
    for namespace in ("cert-manager", "metallb-system", "kamaji-system"):
        assert deployments_available(apps, namespace) == [], f"Deployments not available in {namespace}"
    speaker = apps.read_namespaced_daemon_set("speaker", "metallb-system").status
    assert speaker.number_ready == speaker.desired_number_scheduled > 0

    custom = client.CustomObjectsApi(lab.management)
    pool = custom.get_namespaced_custom_object("metallb.io", "v1beta1", "metallb-system", "ipaddresspools", "gpulab")
    subnet = ipaddress.ip_network(lab.outputs["kind_subnet"])
    assert subnet.version == 4
    for address in pool["spec"]["addresses"]:
        first, last = (ipaddress.ip_address(part) for part in address.split("-"))
        assert first.version == last.version == 4 and first in subnet and last in subnet

    api = core(lab.management)
    for tenant in lab.config.tenants:
        namespace = control_plane_namespace(tenant)
        tcp = custom.get_namespaced_custom_object(
            "kamaji.clastix.io", "v1alpha1", namespace, "tenantcontrolplanes", tenant.name
        )
        assert tcp["status"]["kubernetesResources"]["version"]["status"] == "Ready", tenant.name
        pods = api.list_namespaced_pod(namespace, label_selector=f"kamaji.clastix.io/name={tenant.name}").items
        assert pods, f"no control-plane pod for {tenant.name}"
        for pod in pods:
            statuses = {s.name: s.ready for s in pod.status.container_statuses or []}
            assert set(statuses) == CONTROL_PLANE_CONTAINERS and all(statuses.values()), statuses


def test_tc02_tenant_apis_and_workers(lab) -> None:
    for tenant in lab.config.tenants:
        endpoint = lab.outputs[f"{tenant.output_stem}_endpoint"]
        server = lab.kubeconfigs[tenant.name]["clusters"][0]["cluster"]["server"]
        if lab.config.process_mode:  # kwokctl's API server on a port chosen free at `up`
            assert server == f"https://{endpoint}" and endpoint.startswith("127.0.0.1:"), (server, endpoint)
        else:
            assert server == f"https://{endpoint}:6443", "the kubeconfig must point at the MetalLB endpoint"
        version = client.VersionApi(lab.tenants[tenant.name]).get_code()
        assert version.git_version.startswith(tenant.kubernetes_version), version.git_version

        api = core(lab.tenants[tenant.name])
        for node_name in tenant.worker_node_names():
            node = api.read_node(node_name)
            ready = {c.type: c.status for c in node.status.conditions}["Ready"]
            assert ready == "True", f"{node_name} Ready={ready}"
            if lab.config.real_nodes:  # a real kubelet in a container of gpulab's node image, its runtime containerd
                info = node.status.node_info
                assert info.kubelet_version == tenant.kubernetes_version, (node_name, info.kubelet_version)
                assert info.container_runtime_version.startswith("containerd://"), info.container_runtime_version
                assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {}), "a real node, not KWOK's"
                continue
            if lab.config.process_mode:  # KWOK nodes: no kubelet, no CNI, no konnectivity
                continue
            on_node = api.list_namespaced_pod("kube-system", field_selector=f"spec.nodeName={node_name}").items
            running = {p.metadata.name.rsplit("-", 1)[0] for p in on_node if p.status.phase == "Running"}
            if lab.config.pod_network == "calico":  # the bridge plugin is a file on the node: no pod of its own
                assert "calico-node" in running, (node_name, running)
            assert any(name.startswith("konnectivity-agent") for name in running), (node_name, running)


def test_tc03_gpu_pod_admitted_by_webhook_and_placed_by_hami(lab) -> None:
    lab.needs_hami("HAMi's webhook and placement")
    tenant = first_tenant(lab)
    api = core(lab.tenants[tenant.name])
    with disposable_namespace(api) as namespace:
        api.create_namespaced_pod(namespace, gpu_pod("tc03", image(lab), gpumem=1000, gpucores=5))
        created = api.read_namespaced_pod("tc03", namespace)
        assert created.spec.scheduler_name == "hami-scheduler", "HAMi's webhook did not rewrite schedulerName"
        pod = wait_running(api, namespace, "tc03")
        annotations = pod.metadata.annotations or {}
        assert annotations.get(ALLOCATED), "no HAMi allocation: the pod was not placed by HAMi"
        assert annotations.get("hami.io/vgpu-node") in {node.name for node in tenant.gpu_nodes()}


def test_tc04_workers_advertise_exactly_their_inventory(lab) -> None:
    for tenant in hami_tenants(lab):
        for gpu_node in tenant.gpu_nodes():  # every GPU node advertises its own cards
            node = core(lab.tenants[tenant.name]).read_node(gpu_node.name)
            # Canonical quantities (1000 gpucores arrive as "1k"), read as the API server writes them.
            allocatable = {k: quantity(v) for k, v in node.status.allocatable.items() if k.startswith("nvidia.com/")}
            declared = totals(gpu_node.cards)
            if tenant.gpu_mode == "real":  # the real plugin advertises card slots only
                declared = {"nvidia.com/gpu": declared["nvidia.com/gpu"]}
            assert allocatable == declared, gpu_node.name


def test_tc05_three_shares_on_one_card_bound_back_to_back(lab) -> None:
    lab.needs_hami("HAMi's card allocation and node lock")
    tenant = first_tenant(lab)
    api = core(lab.tenants[tenant.name])
    with disposable_namespace(api) as namespace:
        shares = running_shares(api)
        created = []
        for index in range(len(shares), 3):  # the reference stack already runs trainer-1..3
            name = f"tc05-{index}"
            api.create_namespaced_pod(namespace, gpu_pod(name, image(lab), **SHARE))
            created.append(name)
        shares += [wait_running(api, namespace, name, timeout=90) for name in created]
        assert len(shares) >= 3
        assert len({card_of(pod) for pod in shares[:3]}) == 1, "the three shares must sit on one card"
        bound = sorted(int((p.metadata.annotations or {}).get("hami.io/bind-time", 0)) for p in shares[:3])
        assert bound[-1] - bound[0] <= 60, f"binds {bound} were not within seconds of each other"

    # Back-to-back creation, the node-lock case: pods created together for one node all get bound (each meets
    # the lock the bind before it took, and is bound once it is released or expired). How fast is the
    # scheduling benchmark's to say (benchmarks/hami_scheduling.py, binpack rows), not a clock in this test.
    other = hami_tenants(lab)[-1]  # 9 % of one card's cores: they fit beside trainer-1..3 (90 %) too
    other_api = core(lab.tenants[other.name])
    with disposable_namespace(other_api) as namespace:
        for index in range(3):
            other_api.create_namespaced_pod(
                namespace, gpu_pod(f"tc05-seq-{index}", image(lab), gpumem=1000, gpucores=3)
            )
        for index in range(3):
            pod = wait_running(other_api, namespace, f"tc05-seq-{index}", timeout=120)
            assert (pod.metadata.annotations or {}).get(ALLOCATED), f"tc05-seq-{index} was not placed by HAMi"


def running_shares(api: client.CoreV1Api, hami: bool = True) -> list:
    """The running 20000 MB / 30 % pods (with HAMi: those HAMi placed on a card)."""
    pods = api.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
    found = []
    for pod in pods:
        limits = pod.spec.containers[0].resources.limits or {}
        # Read as the API server writes them: 20000 arrives as "20k" (seen against the real API server).
        share = {key: quantity(limits.get(f"nvidia.com/{key}", "0")) for key in SHARE}
        is_share = share == SHARE
        if is_share and (not hami or (pod.metadata.annotations or {}).get(ALLOCATED)):
            found.append(pod)
    return found


def refused_for(lab, api: client.CoreV1Api, namespace: str, name: str, reason: str) -> None:
    def reason_seen():
        pod = api.read_namespaced_pod(name, namespace)
        assert pod.status.phase == "Pending", f"{name} is {pod.status.phase}; it should not fit"
        return reason in hami_reasons(pod_events(api, namespace, name))

    wait_until(reason_seen, 120, f"HAMi's FilteringFailed event with {reason} for {name}")
    assert api.read_namespaced_pod(name, namespace).spec.scheduler_name == "hami-scheduler"


def refused_by_kube_scheduler(api: client.CoreV1Api, namespace: str, name: str, resource: str) -> None:
    """Without HAMi: kube-scheduler's FailedScheduling event names the extended resource the node lacks."""

    def reason_seen():
        pod = api.read_namespaced_pod(name, namespace)
        assert pod.status.phase == "Pending", f"{name} is {pod.status.phase}; it should not fit"
        return any(f"Insufficient {resource}" in message for _, message in pod_events(api, namespace, name))

    wait_until(reason_seen, 120, f"kube-scheduler's FailedScheduling event with Insufficient {resource} for {name}")


def test_tc06_fourth_share_refused_for_cores(lab) -> None:
    tenant = first_tenant(lab)
    api = core(lab.tenants[tenant.name])
    if len(running_shares(api, lab.hami)) < 3:
        pytest.fail("TC-06 needs tenant-a's three 20000 MB / 30 % pods running (declared in Pulumi.dev.yaml)")
    with disposable_namespace(api) as namespace:
        api.create_namespaced_pod(namespace, gpu_pod("tc06", image(lab), **SHARE))
        if lab.hami:
            refused_for(lab, api, namespace, "tc06", "CardInsufficientCore")
        else:  # the node's 100 gpucores, 90 of them held: kube-scheduler's own accounting refuses it
            refused_by_kube_scheduler(api, namespace, "tc06", "nvidia.com/gpucores")


def denied_at_admission(create, reason: str, *expected: str) -> str:
    """The API server refuses `create()` (the tenant's ValidatingAdmissionPolicy); its message. The API
    server shows only the first failing validation: `reason` must be the one the user sees."""
    with pytest.raises(ApiException) as refused:
        create()
    assert refused.value.status in (400, 403, 422), refused.value
    body = refused.value.body or ""
    try:
        message = json.loads(body).get("message", body)
    except ValueError:
        message = body
    assert f"denied request: {reason}" in message, message
    for text in expected:
        assert text in message, message
    return message


def test_tc07_memory_refusals(lab) -> None:
    """90000 MB is more than any card: refused at `kubectl apply` by the admission policy, which shows
    HAMi's reason first (the pod breaks the 81920 MB per-pod limit too). 30000 MB fits a card but not
    next to trainer-1..3 (21920 MB free): HAMi refuses it at run time."""
    tenant = first_tenant(lab)
    api = core(lab.tenants[tenant.name])
    with disposable_namespace(api) as namespace:
        pod = gpu_pod("tc07", image(lab), gpumem=90000, gpucores=10)
        denied_at_admission(
            lambda: api.create_namespaced_pod(namespace, pod), "CardInsufficientMemory", "asks 90000 MB per card"
        )
        if len(running_shares(api, lab.hami)) < 3:
            pytest.fail("TC-07 needs tenant-a's three 20000 MB / 30 % pods running (declared in Pulumi.dev.yaml)")
        api.create_namespaced_pod(namespace, gpu_pod("tc07-run", image(lab), gpumem=30000, gpucores=5))
        if lab.hami:
            refused_for(lab, api, namespace, "tc07-run", "CardInsufficientMemory")
        else:
            refused_by_kube_scheduler(api, namespace, "tc07-run", "nvidia.com/gpumem")


def test_tc08_tenants_are_isolated(lab) -> None:
    from boundary.kube_client import api_client

    names = [tenant.name for tenant in lab.config.tenants]
    for tenant in lab.config.tenants:
        api = core(lab.tenants[tenant.name])
        assert sorted(n.metadata.name for n in api.list_node().items) == sorted(tenant.worker_node_names())
        for gpu_node in tenant.gpu_nodes() if tenant.gpu_sharing == "hami" else ():  # DRA: test_dra_lab.py's TC-14
            capacity = api.read_node(gpu_node.name).status.capacity
            assert quantity(capacity["nvidia.com/gpu"]) == totals(gpu_node.cards)["nvidia.com/gpu"], gpu_node.name
        namespaces = {n.metadata.name for n in api.list_namespace().items}
        assert not namespaces & {"kamaji-system", "metallb-system", "cert-manager"}, "management namespaces visible"
        groups = {g.name for g in client.ApisApi(lab.tenants[tenant.name]).get_api_versions().groups}
        assert not groups & {"kamaji.clastix.io", "metallb.io", "cert-manager.io"}, groups
        # By the tenant label the workloads carry: two tenants may declare workloads of the same name.
        owners = {(p.metadata.labels or {}).get(TENANT_LABEL) for p in api.list_pod_for_all_namespaces().items}
        assert owners <= {tenant.name, None}, f"{tenant.name} sees the workloads of {owners - {tenant.name, None}}"

    if len(names) > 1:
        # Tenant A's client credentials against tenant B's API server, reached as B's own kubeconfig reaches it
        # (its address and CA, so TLS is verified): B must not know A's client.
        borrowed = copy.deepcopy(lab.kubeconfigs[names[0]])
        borrowed["clusters"][0]["cluster"] = copy.deepcopy(lab.kubeconfigs[names[1]]["clusters"][0]["cluster"])
        intruder = core(api_client(borrowed))
        with pytest.raises(ApiException) as refused:
            intruder.list_namespaced_pod("kube-system")
        assert refused.value.status in (401, 403), refused.value.status


def test_tc09_checker_judges_against_live_usage(lab, capsys) -> None:
    """`python -m policies check --live`: with trainer-1..3 placed, a fourth share is refused *now*, from
    HAMi's allocation annotations (not from the stack's declared workloads), and a small pod fits."""
    from model.stack import stack_name
    from policies.checker import main
    from tests.policies.test_checker import MANIFESTS

    lab.needs_hami("the checker reads HAMi's allocation annotations")
    tenant = first_tenant(lab)
    if len(running_shares(core(lab.tenants[tenant.name]))) < 3:
        pytest.fail("TC-09 needs tenant-a's three 20000 MB / 30 % pods running (declared in Pulumi.dev.yaml)")
    code = main(["--tenant", tenant.name, "--stack", stack_name(), "--live", str(MANIFESTS / "fourth-share.yaml")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "now: " in out and "90 of 100% cores in use" in out
    assert "CardInsufficientCore" in out and "next to what already runs" in out


def test_tc10_gpu_limits_hold_at_admission(lab) -> None:
    """The tenant's ValidatingAdmissionPolicy: refusals at `kubectl apply`, with HAMi's reason and the
    numbers; a valid pod is admitted. Every object is created in a namespace deleted afterwards."""
    tenant = first_tenant(lab)
    client_ = lab.tenants[tenant.name]
    api, apps = core(client_), client.AppsV1Api(client_)
    with disposable_namespace(api) as namespace:
        too_big = gpu_pod("tc10-big", image(lab), gpumem=90000, gpucores=10)
        denied_at_admission(
            lambda: api.create_namespaced_pod(namespace, too_big), "CardInsufficientMemory", "asks 90000 MB per card"
        )
        two = gpu_pod("tc10-two", image(lab), gpus=2, gpumem=1000, gpucores=5)
        # The node has one card: HAMi's NodeInsufficientDevice comes before gpulab's own 1-GPU limit.
        denied_at_admission(lambda: api.create_namespaced_pod(namespace, two), "NodeInsufficientDevice", "has (1)")
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "tc10-deploy"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "tc10"}},
                "template": {"metadata": {"labels": {"app": "tc10"}}, "spec": too_big["spec"]},
            },
        }
        denied_at_admission(
            lambda: apps.create_namespaced_deployment(namespace, deployment), "CardInsufficientMemory", "90000 MB"
        )
        if lab.hami:  # without HAMi there is no webhook to bypass, and no rule asks for hami-scheduler
            bypass = gpu_pod("tc10-bypass", image(lab), gpumem=1000, gpucores=5)
            bypass["metadata"]["labels"]["hami.io/webhook"] = "ignore"  # HAMi's webhook skips it
            bypass["spec"]["schedulerName"] = "default-scheduler"
            denied_at_admission(
                lambda: api.create_namespaced_pod(namespace, bypass), "a GPU pod must be scheduled by hami-scheduler"
            )
        # Updates are judged only when they change what HAMi reads: a relabel or scale goes through, a bigger
        # GPU request is refused like a new one (strategic merge: the container is matched by name).
        update = copy.deepcopy(deployment)
        update["metadata"]["name"] = "tc10-update"
        update["spec"]["replicas"] = 0  # holds no card
        update["spec"]["template"]["spec"] = gpu_pod("tc10-update", image(lab), gpumem=1000, gpucores=5)["spec"]
        apps.create_namespaced_deployment(namespace, update)
        apps.patch_namespaced_deployment("tc10-update", namespace, {"metadata": {"labels": {"tc10": "relabelled"}}})
        apps.patch_namespaced_deployment("tc10-update", namespace, {"spec": {"replicas": 0}})
        grow = {"nvidia.com/gpumem": "90000", "nvidia.com/gpucores": "5"}
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "gpu", "resources": {"limits": grow}}]}}}}
        denied_at_admission(
            lambda: apps.patch_namespaced_deployment("tc10-update", namespace, patch), "CardInsufficientMemory"
        )
        valid = gpu_pod("tc10-valid", image(lab), gpumem=20000, gpucores=5)
        created = api.create_namespaced_pod(namespace, valid)
        expected = lab.config.scheduling.scheduler_name
        assert created.spec.scheduler_name == expected, "admitted (with HAMi: through its webhook)"
