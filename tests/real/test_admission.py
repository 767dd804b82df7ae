"""Tenant-a's admission layer on the real API server, judged at `kubectl apply` as a tenant user meets it:
the objects the program creates (policies and bindings, namespace and quota), pods shaped like the
acceptance suite's (tests/acceptance/helpers.gpu_pod) and as HAMi's webhook leaves them (cel_harness.hami_webhook:
there is no HAMi here). Boundary: kubectl -> kube-apiserver admission (ValidatingAdmissionPolicy, ResourceQuota)."""

from __future__ import annotations

from cel_harness import admitted, hami_webhook, run_policy
from shared_data import ROOT

from model.config.loading import load_stack_file
from model.names import DENY_POLICY, WARN_POLICY
from tests.acceptance.helpers import gpu_pod, wait_until
from tests.real.cluster import POLL, Refusal

IMAGE = load_stack_file(ROOT / "Pulumi.dev.yaml").versions.workload_image
SHARE = {"gpumem": 20000, "gpucores": 30}  # tenant-a's seed workloads (Pulumi.dev.yaml) and TC-05's pods


def test_the_seeds_90000_mb_pod_is_denied_at_kubectl_apply_with_hamis_reason_first(cluster, tenant_lab) -> None:
    pod = hami_webhook(gpu_pod("tc07", IMAGE, gpumem=90000, gpucores=30))
    result = cluster.kubectl("apply", "-n", tenant_lab.namespace, "-f", "-", stdin=pod)
    assert result.returncode != 0, result.stdout
    refusal = Refusal(result.stderr)
    assert refusal.policy == DENY_POLICY, result.stderr
    # The per-pod limit (81920 MB) fails too, but only the first failing validation is shown.
    expected = (
        "CardInsufficientMemory: a container asks 90000 MB per card; the largest card of tenant tenant-a has 81920 MB"
    )
    assert refusal.message == expected
    assert run_policy(tenant_lab.deny, admitted(pod)).failed[1:], "the harness sees the limit fail behind it"
    assert cluster.get("pod", "-n", tenant_lab.namespace, "tc07") is None, "nothing was stored"


def test_three_20000_mb_30_percent_pods_are_admitted_and_counted_by_the_quota(cluster, tenant_lab) -> None:
    names = [f"share-{i}" for i in range(1, 4)]
    for name in names:
        result = cluster.kubectl(
            "apply", "-n", tenant_lab.namespace, "-f", "-", stdin=hami_webhook(gpu_pod(name, IMAGE, **SHARE))
        )
        assert result.returncode == 0, result.stderr
        assert DENY_POLICY not in result.stderr and WARN_POLICY not in result.stderr, result.stderr
    for name in names:
        stored = cluster.get("pod", "-n", tenant_lab.namespace, name)
        assert stored["spec"]["schedulerName"] == "hami-scheduler"
    # The card count HAMi's webhook puts in the limits reaches the requests (here by the API server's defaulting
    # of what we send; in a lab by the defaulting that follows a mutating webhook, apiserver dispatcher.go),
    # so the tenant's requests.nvidia.com/gpu quota counts each pod.
    quota = ("resourcequota", "-n", tenant_lab.namespace, tenant_lab.quota["metadata"]["name"])
    used = lambda: cluster.get(*quota)["status"].get("used", {}).get("requests.nvidia.com/gpu")  # noqa: E731
    wait_until(lambda: used() == "3", 30, "the quota to count 3 GPUs in use", interval=POLL)


def test_a_gpu_pod_with_a_node_name_is_denied_as_hami_v2_8_3_s_webhook_denies_it(cluster, tenant_lab) -> None:
    """Tenant-a runs HAMi v2.8.3, whose webhook refuses a GPU pod with spec.nodeName: "pod has node assigned" (tag
    v2.8.3, pkg/scheduler/webhook.go `Handle` 89-98). Here no webhook runs, as when it is down: the deny policy says
    it in HAMi's words. A pod naming hami-scheduler passes, as v2.8.3 lets it through untouched (63-68)."""
    pod = gpu_pod("pinned", IMAGE, **SHARE)
    pod["spec"]["nodeName"] = "tenant-a-worker"
    result = cluster.kubectl("apply", "--dry-run=server", "-n", tenant_lab.namespace, "-f", "-", stdin=pod)
    assert result.returncode != 0, result.stdout
    refusal = Refusal(result.stderr)
    assert refusal.policy == DENY_POLICY, result.stderr
    assert refusal.message == (
        "PodHasNodeAssigned: HAMi v2.8.3's webhook refuses the pod (each of a workload's pods, at create): pod has "
        "node assigned"
    )
    pod["spec"]["schedulerName"] = "hami-scheduler"
    result = cluster.kubectl("apply", "--dry-run=server", "-n", tenant_lab.namespace, "-f", "-", stdin=pod)
    assert result.returncode == 0, result.stderr
