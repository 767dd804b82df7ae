"""The refusals decided by one pod alone, from the tenant's inventory: what the pack and the
in-tenant admission policy (model/kube_objects/admission_policy.py) must agree on, question for question and
in the same order (kubectl shows only the admission policy's first failing validation):

- what HAMi's webhook refuses whatever else runs, the first of (hami/webhook.py `webhook_denial`): (v2.10.0) a
  gpumem-percentage outside 0-100 (InvalidGpumemPercentage), a privileged container (PrivilegedContainer); (both
  releases, each finding the GPU resource its own way) spec.nodeName (PodHasNodeAssigned); a mutating webhook, it
  answers before any validating policy;
- (v2.10.0) GpumemNotReadByHami: a nvidia.com/gpumem beyond int32, which HAMi drops with the whole request
  (pkg/device/nvidia/device.go `GenerateResourceRequests` 531-543): gpulab cannot predict what follows;
- NodeInsufficientDevice: a container asks for more cards than the node has (with several GPU nodes,
  than the node with the most cards has: a rule never refuses what some node can hold); under v2.10.0 an init
  container too, as it does below;
- CardTypeMismatch / CardUuidMismatch: the pod's selectors leave no card at all (a type selector with
  non-ASCII letters is left to HAMi: it upper-cases with Unicode rules, the admission CEL cannot);
- CardInsufficientMemory: a container (v2.10.0: init containers too) asks more memory than the tenant's largest
  card holds (including, under v2.8.3, a percentage above 100);
- InitContainerGpuRequest: an init container asks for a GPU resource (HAMi places app containers only);
- PodGpuLimitExceeded: the pod asks more than the tenant's per-pod `gpus`, `gpumem` (a percentage counted on
  the tenant's largest card) or `gpucores` (`pod_asks`): its app containers together; where the release places init
  containers (v2.10.0), its effective request as HAMi counts it, the larger of that and its largest init container,
  per resource.

Two advisories (the admission policy warns, the pack notes): cores above 100 (HAMi clamps them to
100) and a memory percentage of 0 (v2.8.3 gives the container 0 MB, v2.10.0 the whole card).

Each is judged with the tenant's HAMi release (hami/releases.py, `rules_for(inventory.hami_version)`): its
requests (`resolve_request`: v2.10.0 reads a percentage of 0 as not given and clamps one above 100, which its webhook
has refused already), its selectors (v2.10.0 trims them, devices.go `CheckUUID` 693-713, `CheckType` 719-738), and
init containers, which v2.10.0 places (devices.go `Resourcereqs` 639-692; score.go `scoreNode` 309-318: on each node,
every init container fitted alone on the node as it was before the pod, `allocateInitContainers` 226-254, then the
app containers on it again, `allocateAppContainers` 256-286, each through `fitInDevices` 81-137, whose card count
and device.go `Fit` judge init and app containers alike): NodeInsufficientDevice and CardInsufficientMemory ask of
init containers too, and InitContainerGpuRequest is v2.8.3's only. v2.10.0 reads no restartPolicy
(`len(task.Spec.InitContainers)`, score.go 309; nothing in pkg/ reads it; the tag's own
docs/develop/sidecarsContainer-design.md 5-11 says so, and pkg/device/initContainer.go 64-65 leaves sidecars to a
later PR, #2584): a native sidecar (restartPolicy: Always, KEP-753), which Kubernetes runs beside the app
containers, is to HAMi one more init container, fitted alone and counted in the init containers' peak, and so it
is to these rules and `pod_asks`. Only the API server's nvidia.com/gpu quota counts it beside the app containers
(`gpu_count_quota`). v2.10.0 adds InvalidDeviceScoringWeights (a
hami.io/device-scoring-weights it cannot parse fails the pod's filter: score.go `calcScoreWithOptions` 361-364).
model/kube_objects/admission_policy.py writes the same rules per release (its `PolicyRules`).

After these, before the placement: HAMi's webhook on the namespace quota at create (v2.9.0 and later;
hami/webhook.py), then the API server's nvidia.com/gpu quota (a validating admission, after the mutating webhook).
"""

from __future__ import annotations

from collections.abc import Sequence

from hami.cards import ContainerRequest, PodRequest, _type_ok, _uuid_ok, gpumem_read, resolve_request
from hami.cluster import counted_init_containers
from hami.releases import V2_8_3, Rules, rules_for
from hami.webhook import quota_refusal, webhook_denial
from placement.inventory import TenantInventory
from placement.verdicts import (
    BadScoringWeights,
    CardTooSmall,
    CoresAbove100,
    GpumemNotRead,
    GpuQuotaExceeded,
    InitContainerAsks,
    NoCardMatches,
    OverPodLimit,
    PodAdvisory,
    PodRefusal,
    PodVerdicts,
    RefusedAtCreate,
    RefusedByWebhook,
    TooManyCards,
    ZeroMemory,
)
from placement.workloads import Workload, quota_gpus, workload_of

LIMITS = ("gpus", "gpumem", "gpucores")


def pod_asks(pod: PodRequest, largest_mb: int, rules: Rules) -> dict[str, int]:
    """What the pod asks of each per-pod limit: cards, MB (a percentage counted on the largest card) and cores (each
    card's clamped to 100), summed over its app containers. Where the release places init containers (v2.10.0:
    devices.go `Resourcereqs` 639-692, score.go `allocateInitContainers` 226-254), they run one after the other
    before the app containers, so the pod asks the larger of that sum and its largest init container, per resource:
    its effective request, as v2.10.0's own quota counts it (webhook.go `fitResourceQuota` 157-180; hami/webhook.py
    `quota_request`) and, per card, its scheduler holds it (initContainer.go `CollapseInitContainerUsage` 36-113).
    A native sidecar (restartPolicy: Always) is one of those init containers, as HAMi reads no restartPolicy (the
    module's docstring), where Kubernetes' PodRequests adds it to the app containers (placement/workloads.py
    `pod_gpus`)."""

    def each(container: ContainerRequest) -> tuple[int, int, int]:
        c = resolve_request(container, rules)
        return c.nums, c.nums * c.memory_for(largest_mb), c.nums * c.fit_cores

    app = [each(c) for c in pod.containers]
    init = [each(c) for c in counted_init_containers(pod, rules)]
    return {key: max([sum(a[i] for a in app), *(c[i] for c in init)]) for i, key in enumerate(LIMITS)}


def _non_ascii_type_selector(pod: PodRequest) -> bool:
    """HAMi upper-cases type selectors with Go's Unicode rules; the admission policy's CEL upperAscii()
    cannot, so a selector with other letters is left to HAMi (and to the placement check)."""
    return any(not value.isascii() for values in (pod.use_types, pod.nouse_types) if values for value in values)


def per_pod_refusals(inventory: TenantInventory, pod: PodRequest) -> list[PodRefusal]:
    """In the admission policy's order, which is HAMi's: cards the node has (fitInDevices), then per card
    type, UUID and memory (device.go Fit); gpulab's own rules after. The first is what kubectl shows. Judged with
    the tenant's release (the module's docstring)."""
    rules = rules_for(inventory.hami_version)
    cards = inventory.cards
    largest = max((card.memory_mb for card in cards), default=0)
    refusals: list[PodRefusal] = []
    denial = webhook_denial(pod.admission, rules)
    if denial is not None:
        refusals.append(RefusedByWebhook(*denial))
    every = (*pod.init_containers, *pod.containers)
    refusals += [GpumemNotRead(c.name, c.memreq) for c in every if not gpumem_read(c, rules)]
    # The containers HAMi fits on a node: under v2.10.0 every init container first, each alone on the node as it was
    # before the pod, restartPolicy unread (a native sidecar too: score.go `scoreNode` 309-318,
    # `allocateInitContainers` 226-254), then the app containers together (`allocateAppContainers` 256-286).
    inits = counted_init_containers(pod, rules)
    fitted = [(c, True) for c in inits] + [(c, False) for c in pod.containers]
    most = max((len(on_node) for _, on_node in inventory.node_cards()), default=0)
    refusals += [TooManyCards(c.name, c.nums, most, init) for c, init in fitted if c.nums > most]
    # A pod of init containers only is a GPU pod to v2.10.0 (scheduler.go `Filter` 1069-1087).
    if cards and fitted and not _non_ascii_type_selector(pod) and not any(_type_ok(c, pod, rules) for c in cards):
        refusals.append(NoCardMatches("type"))
    if cards and fitted and not any(_uuid_ok(card, pod, rules) for card in cards):
        refusals.append(NoCardMatches("uuid"))
    for c, init in fitted:
        memory = resolve_request(c, rules).memory_for(largest)
        if cards and memory > largest:
            refusals.append(CardTooSmall(c.name, memory, tuple(cards), init))
    if not rules.init_containers_counted:
        refusals += [InitContainerAsks(init) for init in pod.init_containers]
    if rules.scoring_weights and pod.scoring_weights_error is not None:
        refusals.append(BadScoringWeights(pod.scoring_weights_error))
    asked = pod_asks(pod, largest, rules)
    for key in LIMITS:
        limit = getattr(inventory.limits, key)
        if limit is not None and asked[key] > limit:
            refusals.append(OverPodLimit(key, asked[key], limit))
    return refusals


def per_pod_advisories(pod: PodRequest, rules: Rules = V2_8_3) -> list[PodAdvisory]:
    """What HAMi accepts but changes, under `rules`: cores above 100 are clamped (device.go `Fit`, both releases);
    0 % memory is 0 MB under v2.8.3 and the whole card under v2.10.0 (`resolve_request`)."""
    advisories: list[PodAdvisory] = []
    for c in pod.containers:
        if c.cores > 100:
            advisories.append(CoresAbove100(c.name, c.cores))
        if c.memreq == 0 and c.mem_percentage == 0:
            advisories.append(ZeroMemory(c.name, whole_card=rules.clamp_memory_percentage))
    return advisories


def refused_at_create(inventory: TenantInventory, pods: Sequence[PodRequest]) -> list[RefusedAtCreate]:
    """The pods the tenant's release's webhook refuses when they are created (hami/webhook.py `quota_refusal`;
    v2.10.0), next to what already counts against their namespace's HAMi quota: certain in every order, since
    that only grows. Once per workload (its replicas are identical); none under v2.8.3."""
    rules = rules_for(inventory.hami_version)
    if not rules.quota_at_admission or not pods:
        return []
    cluster = inventory.cluster(pods)
    refused: dict[str, RefusedAtCreate] = {}
    for pod in pods:
        in_use = cluster.quota_in_use(pod.namespace)
        message = quota_refusal(pod, in_use, rules)
        if message is not None and in_use is not None:
            refused.setdefault(workload_of(pod), RefusedAtCreate(pod, in_use, message))
    return list(refused.values())


def gpu_count_quota(inventory: TenantInventory, pods: Sequence[PodRequest]) -> list[GpuQuotaExceeded]:
    """The native `requests.nvidia.com/gpu` quota, which the API server checks at creation, in order. It counts a
    pod's effective request as Kubernetes does (placement/workloads.py `pod_gpus`): the larger of its app containers'
    sum and its largest init container, a native sidecar counted beside the app containers and the init containers
    after it, as HAMi does not; a pod with GPU init containers reaches here only where the release places them
    (v2.10.0)."""
    limit = inventory.quota.gpus if inventory.quota else None
    if limit is None:
        return []
    refused: list[GpuQuotaExceeded] = []
    used = {ns: usage.gpus for ns, usage in inventory.namespace_usage.items()}
    for pod in pods:
        if not inventory.quota_applies(pod.namespace):
            continue
        asks = quota_gpus(pod)
        total = used.get(pod.namespace, 0)
        if total + asks > limit:
            refused.append(GpuQuotaExceeded(pod, limit, asks, total))
        else:
            used[pod.namespace] = total + asks
    return refused


def pod_level(
    inventory: TenantInventory, workloads: Sequence[Workload]
) -> tuple[list[PodVerdicts], list[GpuQuotaExceeded], list[PodRequest], list[RefusedAtCreate]]:
    """What is decided pod by pod, whatever the nodes, once per workload (the per-pod rules, shared with the
    admission policy; HAMi's webhook on the namespace quota; then the GPU-count quota), and the GPU pods left for
    the placement analysis: those of workloads no per-pod rule refused (admission refuses those) and the webhook
    did not refuse (they never exist: nothing places or counts them)."""
    rules = rules_for(inventory.hami_version)
    per_workload = []
    for workload in workloads:
        if workload.pods:
            pod = workload.pods[0]  # replicas are identical
            verdicts = PodVerdicts(
                workload.label, tuple(per_pod_refusals(inventory, pod)), tuple(per_pod_advisories(pod, rules))
            )
            if verdicts.refusals or verdicts.advisories:
                per_workload.append(verdicts)
    refused = {verdicts.workload for verdicts in per_workload if verdicts.refusals}
    # What the webhook refuses before the quota (`webhook_denial`) never reaches its quota check.
    denied_first = {
        verdicts.workload
        for verdicts in per_workload
        if any(isinstance(refusal, RefusedByWebhook) for refusal in verdicts.refusals)
    }
    gpu_pods = [
        (w.label, pod) for w in workloads for pod in w.pods if pod.containers or counted_init_containers(pod, rules)
    ]
    # HAMi's webhook is a mutating admission webhook: the API server calls it before the validating admission policy
    # that holds the per-pod rules (Kubernetes' admission order: mutating, then validating), so a pod both refuse is
    # refused by the webhook, and the webhook is judged on every GPU pod (seen in the real differential, seed 7004).
    at_create = refused_at_create(inventory, [pod for label, pod in gpu_pods if label not in denied_first])
    denied = {workload_of(refusal.pod) for refusal in at_create}
    pods = [pod for label, pod in gpu_pods if label not in refused and workload_of(pod) not in denied]
    return per_workload, gpu_count_quota(inventory, pods), pods, at_create
