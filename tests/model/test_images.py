"""The image inventory: complete against what the pinned charts and manifests really run (rendered
offline with the program's own values), followed by pre-loading, and ordered before every user."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml
from lab_harness import LAB_PROJECT, lab_config, make_tenant, reference_program, run_program
from shared_data import HAMI_CHART, KAMAJI_CHART, ROOT, SAFE_LOADER, upstream_path

from model.config import parse_config
from model.docker_lab.images import inventory, main, to_load
from model.image_ref import ImageRef

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk renders charts (requirements-dev.txt)")


@pytest.fixture(scope="module")
def program():
    return reference_program()


@pytest.fixture(scope="module")
def lab():
    return parse_config(lab_config())


def documents(text: str) -> list[dict]:
    # libyaml's loader: Calico's 1 MB manifest takes 0.6 CPU-s in pure Python.
    return [doc for doc in yaml.load_all(text, Loader=SAFE_LOADER) if isinstance(doc, dict)]


def images_in(objects: list[dict]) -> set[str]:
    """Every container image a list of Kubernetes objects would run, fully qualified, by tag (what a node
    looks up; the inventory may also pin a digest, which the host pull checks)."""
    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for key in ("containers", "initContainers"):
                for container in value.get(key) or []:
                    found.add(ImageRef.parse(container["image"]).tagged)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(objects)
    return found


def render(archive: str, release, extra_values: dict | None = None) -> list[dict]:
    """A chart rendered like `helm template` with the values the program gives its helm.v3.Release."""
    values = copy.deepcopy(extra_values or {})
    values.update(copy.deepcopy(release.inputs.get("values") or {}))
    chart = helm_python.Chart.load(str(upstream_path(archive)))
    rendered = chart.render(values, name=release.inputs["name"], namespace=release.inputs["namespace"], is_install=True)
    return [doc for name, text in rendered.items() if name.endswith((".yaml", ".yml")) for doc in documents(text)]


def kamaji_objects(program) -> list[dict]:
    release = program.named("management-kamaji")
    file_values = yaml.safe_load((ROOT / release.inputs["valueYamlFiles"][0].path).read_text())
    return render(KAMAJI_CHART, release, file_values)


def hami_objects(program, tenant: str = "tenant-a") -> list[dict]:
    return render(HAMI_CHART, program.named(f"{tenant}-gpus-hami"))


def by_part(lab, part: str) -> set[str]:
    return {use.ref.tagged for use in inventory(lab) if use.part == part}


def test_every_image_the_kamaji_chart_runs_is_in_the_inventory(program, lab) -> None:
    rendered = images_in(kamaji_objects(program))
    assert rendered, "the render found no images: the check would be vacuous"
    assert rendered <= by_part(lab, "management"), rendered - by_part(lab, "management")


def test_every_image_the_hami_chart_runs_is_in_the_inventory(program, lab) -> None:
    for tenant in ("tenant-a", "tenant-b"):
        rendered = images_in(hami_objects(program, tenant))
        assert rendered <= by_part(lab, tenant), rendered - by_part(lab, tenant)


@pytest.mark.parametrize(
    ("manifest", "part"),
    [("calico/calico-v3.31.6.yaml", "tenant-a"), ("metallb/metallb-native-v0.16.1.yaml", "management")],
)
def test_every_image_a_manifest_runs_is_in_the_inventory(lab, manifest: str, part: str) -> None:
    rendered = images_in(documents(upstream_path(manifest).read_text()))
    assert len(rendered) >= 2
    assert rendered <= by_part(lab, part), rendered - by_part(lab, part)


def test_the_kamaji_render_shows_what_the_values_are_for(program) -> None:
    objects = kamaji_objects(program)
    controller = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "kamaji")
    container = controller["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "clastix/kamaji:26.8.2-edge"
    assert container["imagePullPolicy"] == "IfNotPresent", "the chart's default is Always"
    assert "--disable-telemetry" in container["args"] or any("telemetry" in a for a in container["args"])
    assert "resources" not in container or not container["resources"], "resources: null removes the 100Mi limit"
    datastore = next(o for o in objects if o["kind"] == "DataStore")
    assert datastore["metadata"]["name"] == "default"
    kubectl = {image for image in images_in(objects) if "/clastix/kubectl:" in image}
    assert kubectl == {"docker.io/clastix/kubectl:v1.35"}, "never the derived, untraced v1.36"
    etcd_jobs = [o for o in objects if o["kind"] == "Job"]
    assert etcd_jobs, "kamaji-etcd's hook jobs are rendered"


def test_the_hami_render_shows_what_the_values_are_for(program) -> None:
    objects = hami_objects(program)
    scheduler = next(o for o in objects if o["kind"] == "Deployment" and "scheduler" in o["metadata"]["name"])
    containers = {c["name"]: c for c in scheduler["spec"]["template"]["spec"]["containers"]}
    images = {c["image"] for c in containers.values()}
    assert "registry.k8s.io/kube-scheduler:v1.36.4" in images
    assert any(
        "--node-lock-timeout=2s" in " ".join(c.get("command", []) + c.get("args", [])) for c in containers.values()
    )
    services = [o for o in objects if o["kind"] == "Service"]
    assert services and all(s["spec"].get("type", "ClusterIP") == "ClusterIP" for s in services)
    assert all("nodePort" not in port for s in services for port in s["spec"]["ports"])
    assert "docker.io/projecthami/mock-device-plugin:1.0.1" in images_in(objects)


def test_nothing_rendered_forces_always_pulling_a_preloaded_image(program) -> None:
    """A pre-loaded image with imagePullPolicy Always would still be pulled from the registry."""
    for objects in (kamaji_objects(program), hami_objects(program)):
        for obj in objects:
            for key in ("containers", "initContainers"):
                spec = (obj.get("spec") or {}).get("template", {}).get("spec") or obj.get("spec") or {}
                for container in spec.get(key) or []:
                    assert container.get("imagePullPolicy", "IfNotPresent") != "Always", (obj["kind"], container)


@pytest.fixture(scope="module")
def evidence(program, lab) -> set[str]:
    """What some source says the lab runs: renders, manifests, pins, and Kamaji's per-version images."""
    return (
        images_in(kamaji_objects(program))
        | images_in(hami_objects(program))
        | images_in(documents(upstream_path("calico/calico-v3.31.6.yaml").read_text()))
        | images_in(documents(upstream_path("metallb/metallb-native-v0.16.1.yaml").read_text()))
        | {
            ImageRef.parse(lab.versions.management_node_image).tagged,
            ImageRef.parse(lab.versions.workload_image).tagged,
        }
        | {
            f"quay.io/jetstack/cert-manager-{p}:v1.21.2"
            for p in ("controller", "cainjector", "webhook", "startupapicheck")
        }
        | {f"registry.k8s.io/{c}:v1.36.4" for c in ("kube-apiserver", "kube-controller-manager")}
        | {f"registry.k8s.io/kas-network-proxy/proxy-{p}:v0.36.0" for p in ("server", "agent")}
        | images_in(kube_proxy_objects(program))
    )


def kube_proxy_objects(program) -> list[dict]:
    """The kube-proxy DaemonSets the program creates in the tenants (model/docker_lab/kube_proxy.py)."""
    found = [
        r.inputs for r in program.of_type("kubernetes:apps/v1:DaemonSet") if r.name.endswith("-kube-proxy-daemonset")
    ]
    assert len(found) == 2, "one kube-proxy per tenant"
    return found


@pytest.mark.parametrize("index", range(24))
def test_dropping_any_one_image_breaks_a_check(lab, evidence: set[str], index: int) -> None:
    """Each inventory entry is backed by evidence, so none is there by accident and, with the render
    tests above, dropping one leaves a rendered image or a pin unlisted."""
    images = sorted({use.ref.tagged for use in inventory(lab)})
    assert len(images) == 24, "the reference lab runs 24 distinct images; update this test with the inventory"
    assert images[index] in evidence, f"{images[index]} is in the inventory with no evidence"


def test_the_inventory_is_exactly_what_the_evidence_says(lab, evidence: set[str]) -> None:
    """Drop any one image from the inventory and this fails: every piece of evidence must be listed."""
    listed = {use.ref.tagged for use in inventory(lab)}
    assert listed == evidence, {"unlisted": evidence - listed, "unbacked": listed - evidence}


def test_the_inventory_follows_the_config() -> None:
    base = parse_config(lab_config())
    other_version = lab_config()
    pinned = dict(base.versions.worker_node_images)
    other_version["versions"] = {"workerNodeImages": {**pinned, "v1.35.2": "kindest/node:v1.35.2@sha256:" + "1" * 64}}
    other_version["tenants"][1]["kubernetesVersion"] = "v1.35.2"
    changed = parse_config(other_version)
    tenant_b = {use.ref.full for use in inventory(changed) if use.part == "tenant-b"}
    assert "registry.k8s.io/kas-network-proxy/proxy-agent:v0.35.0" in tenant_b
    management = {u.ref.full: u for u in inventory(changed) if u.part == "management"}
    assert not management["registry.k8s.io/kube-apiserver:v1.35.2"].preloaded, "not in the v1.36.4 kind node"
    assert management["registry.k8s.io/kube-apiserver:v1.36.4"].preloaded
    override = lab_config()
    override["versions"] = {
        "calicoManifest": "https://raw.githubusercontent.com/projectcalico/calico/v3.31.7/manifests/calico.yaml"
    }
    assert "quay.io/calico/node:v3.31.7" in {u.ref.full for u in inventory(parse_config(override))}
    assert "docker.io/projecthami/mock-device-plugin:1.0.1" in {u.ref.full for u in inventory(base)}


def test_images_already_in_the_node_or_run_by_docker_are_not_loaded(lab) -> None:
    management = {ref.full for ref in to_load(lab, "management")}
    tenant = {ref.full for ref in to_load(lab, "tenant-a")}
    assert "registry.k8s.io/kube-apiserver:v1.36.4" not in management, "kindest/node v1.36.4 carries it"
    assert "registry.k8s.io/kube-proxy:v1.36.4" not in tenant
    assert not any("kindest/node" in image for image in management | tenant)
    assert "docker.io/projecthami/hami:v2.8.3" in tenant and "quay.io/calico/node:v3.31.6" in tenant


@pytest.mark.integration
def test_the_command_prints_one_reference_per_line(capsys) -> None:
    assert main(["--stack", "dev", "--project-dir", str(LAB_PROJECT)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == sorted(set(lines)) and len(lines) == 24
    assert all(ImageRef.parse(line).full == line for line in lines), "fully qualified"
    result = subprocess.run(
        [sys.executable, "-m", "model.docker_lab.images", "--stack", "dev", "--project-dir", str(LAB_PROJECT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0 and result.stdout.splitlines() == lines and result.stderr == ""


def test_each_node_is_loaded_after_it_exists_and_before_what_runs_there(program) -> None:
    management_load = program.named("management-images")
    assert program.depends_on(management_load, program.named("management-kind"))
    for name in ("management-cert-manager", "management-metallb", "management-kamaji"):
        assert program.depends_on(program.named(name), management_load), name
    for tenant in ("tenant-a", "tenant-b"):
        load = program.named(f"{tenant}-worker-images")
        assert program.depends_on(load, program.named(f"{tenant}-worker-node"))
        for later in (
            f"{tenant}-worker-join-config",
            f"{tenant}-worker-join",
            f"{tenant}-worker-calico",
            f"{tenant}-gpus-hami",
        ):
            assert program.depends_on(program.named(later), load), later
        images = load.inputs["environment"]["IMAGES"].split()
        assert "docker.io/projecthami/hami:v2.8.3" in images
        pulls = {
            p.inputs["environment"]["TAGGED"]: p
            for p in program.of_type("command:local:Command")
            if p.name.startswith("images-pull-")
        }
        for image in images:
            assert program.depends_on(load, pulls[image]), image


def test_one_pull_per_image_whatever_the_number_of_tenants() -> None:
    tenants = [make_tenant(f"t{i}", i) for i in range(5)]
    five = run_program(lab_config(tenants=tenants))
    pulls = five.of_type("command:local:Command")
    names = [p.name for p in pulls if p.name.startswith("images-pull-")]
    assert len(names) == len(set(names))
    hami = [n for n in names if "projecthami-hami" in n]
    assert len(hami) == 1, "five workers, one host pull"
    loads = [p for p in pulls if p.name.endswith("-worker-images")]
    assert len(loads) == 5


def test_a_second_run_with_nothing_changed_plans_no_transfer(program) -> None:
    """Pulumi re-runs a Command only when its inputs change: the same config gives the same pull and load
    inputs, so a second `pulumi up` moves no image; a new node id (a replaced worker) changes the load."""
    again = run_program(lab_config())

    def transfers(prog) -> dict[str, dict]:
        return {
            r.name: r.inputs
            for r in prog.of_type("command:local:Command")
            if r.name.startswith("images-pull-") or r.name.endswith("-images")
        }

    first = transfers(program)
    assert first and first == transfers(again)
    assert all("NODE_ID" in inputs["environment"] for name, inputs in first.items() if name.endswith("-images"))


def test_nothing_the_lab_installs_in_a_tenant_is_refused_by_its_admission_policy(program) -> None:
    """HAMi (rendered with the program's values, its mock device plugin included) and Calico run in
    every tenant; the GPU admission policy gpulab installs there must admit all of their pods."""
    from cel_harness import run_policy

    from model.config import parse_config
    from model.kube_objects.admission_policy import DENY_POLICY, policy_objects
    from placement.workloads import POD_TEMPLATE_PATHS

    tenant = parse_config(lab_config()).tenants[0]
    deny = next(
        o
        for o in policy_objects(tenant)
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == DENY_POLICY
    )
    objects = hami_objects(program) + documents(upstream_path("calico/calico-v3.31.6.yaml").read_text())
    checked = 0
    for obj in objects:
        if obj.get("kind") in POD_TEMPLATE_PATHS:
            assert run_policy(deny, obj).failed == [], f"{obj['kind']}/{obj['metadata']['name']}"
            checked += 1
    assert checked >= 5
