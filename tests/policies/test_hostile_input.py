"""Bad, odd and hostile input: the checker exits 2 with one line, the pack reports a violation, and
neither crashes or runs unbounded. Each input found in review has its own case; a fuzz test
(hypothesis, fixed seed) covers the rest of the space."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_data import ROOT
from work_budget import work_budget

from policies.checker import main
from tests.policies.test_policies import gpu_violations, inventory_configmap
from tests.policies.test_policies import pod as pack_pod

BAD_QUANTITIES = ["1.2.3", ".", "1" * 400, "", "1e", "--1", "1Xi", "1e99999999", "-5", "0.5"]
# Checking one small pod takes about 32,000 function calls (stack file included; 691,000 for a Deployment of the
# 10,000 replicas allowed): a refusal of hostile input must come before any such work is multiplied.
REFUSAL_CALLS = 300_000
GOOD_QUANTITIES = {"1e9": 10**9, "1T": 10**12, "1Pi": 2**50, "2E": 2 * 10**18, "+3": 3, "5.": 5, "1e3": 1000}


def run_checker(capsys, tmp_path: Path, text: str | bytes, project_dir: Path = ROOT) -> tuple[int, str, str]:
    manifest = tmp_path / "in.yaml"
    manifest.write_bytes(text if isinstance(text, bytes) else text.encode())
    code = main(["--tenant", "tenant-a", "--project-dir", str(project_dir), str(manifest)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def pod_yaml(limits: str = '{"nvidia.com/gpumem": "1000"}', **parts: str) -> str:
    metadata = parts.get("metadata", "{name: p, namespace: gpu-workloads}")
    container = parts.get("container", f"{{name: c, image: x, resources: {{limits: {limits}}}}}")
    spec = parts.get("spec", f"{{containers: [{container}]}}")
    return f"apiVersion: v1\nkind: {parts.get('kind', 'Pod')}\nmetadata: {metadata}\nspec: {spec}\n"


def assert_bad_input(code: int, out: str, err: str, one_line: bool = True) -> None:
    """Exit 2, an `error:` line, no traceback. A stack file's config errors list one problem per line."""
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and (len(lines) == 1 or not one_line), err
    assert "Traceback" not in err + out


@pytest.mark.parametrize("value", BAD_QUANTITIES)
def test_bad_quantities_are_bad_input(capsys, tmp_path, value) -> None:
    assert_bad_input(*run_checker(capsys, tmp_path, pod_yaml(f'{{"nvidia.com/gpumem": "{value}"}}')))


@pytest.mark.parametrize("value, plain", GOOD_QUANTITIES.items())
def test_every_kubernetes_quantity_form_is_read(value, plain) -> None:
    from placement.workloads import whole_quantity

    assert whole_quantity(value, "x") == plain


def test_huge_valid_quantities_are_a_refusal_not_bad_input(capsys, tmp_path) -> None:
    for value in ("1e9", "1T", "1Pi"):
        code, out, err = run_checker(capsys, tmp_path, pod_yaml(f'{{"nvidia.com/gpumem": "{value}"}}'))
        assert code == 1 and "CardInsufficientMemory" in out, (value, out, err)


def test_gpu_zero_is_no_gpu_request(capsys, tmp_path) -> None:
    """gpu: 0 asks HAMi for no device; the old checker said the pod "asks for memory or cores"."""
    code, out, err = run_checker(capsys, tmp_path, pod_yaml('{"nvidia.com/gpu": "0"}'))
    assert code == 0 and err == "", (out, err)


@pytest.mark.parametrize(
    "parts",
    [
        {"kind": "5"},
        {"kind": "null"},
        {"metadata": "[a, b]"},
        {"metadata": "just-a-string"},
        {"spec": "[1, 2]"},
        {"spec": "text"},
        {"container": "[c]"},
        {"container": "a-string"},
        {"container": "{name: c, resources: [1]}"},
        {"container": "{name: c, resources: text}"},
        {"container": "{name: c, resources: {limits: [1]}}"},
        {"container": "{name: c, resources: {limits: text}}"},
        {"metadata": "{name: p, labels: [a, b]}"},
        {"metadata": "{name: p, annotations: {a: [1]}}"},
        {"spec": "{containers: {a: b}}"},
    ],
    ids=lambda parts: ",".join(f"{k}={v}" for k, v in parts.items()),
)
def test_malformed_objects_are_bad_input(capsys, tmp_path, parts) -> None:
    assert_bad_input(*run_checker(capsys, tmp_path, pod_yaml(**parts)))


def test_non_utf8_file_is_bad_input(capsys, tmp_path) -> None:
    assert_bad_input(*run_checker(capsys, tmp_path, pod_yaml().encode() + b"# \xff\xfe\n"))


def test_deep_nesting_is_bad_input_fast(capsys, tmp_path) -> None:
    with work_budget(REFUSAL_CALLS):  # bounded by the work done, not the clock (tests/support/work_budget.py)
        assert_bad_input(*run_checker(capsys, tmp_path, "[" * 100_000))


ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 10) if prev else ', '.join(['x'] * 10)}]\n"
    for prev, name in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh", strict=True)
)


def test_alias_bomb_in_a_manifest_is_refused_fast(capsys, tmp_path) -> None:
    text = pod_yaml() + "---\n" + ALIAS_BOMB
    with work_budget(REFUSAL_CALLS):  # bounded by the work done, not the clock (tests/support/work_budget.py)
        assert_bad_input(*run_checker(capsys, tmp_path, text))


def test_alias_bomb_in_an_annotation_is_refused_fast(capsys, tmp_path) -> None:
    bomb = ALIAS_BOMB.replace("h: &h", "annotations: &h", 1)
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" + "".join(f"  {line}\n" for line in bomb.splitlines())
    text += 'spec: {containers: [{name: c, resources: {limits: {"nvidia.com/gpumem": "1"}}}]}\n'
    with work_budget(REFUSAL_CALLS):  # bounded by the work done, not the clock (tests/support/work_budget.py)
        assert_bad_input(*run_checker(capsys, tmp_path, text))


def test_huge_replicas_are_capped(capsys, tmp_path) -> None:
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: gpu-workloads}\n"
        "spec:\n  replicas: 100000000\n  template:\n    spec:\n      containers:\n"
        '        - {name: c, resources: {limits: {"nvidia.com/gpumem": "1000"}}}\n'
    )
    with work_budget(REFUSAL_CALLS):  # bounded by the work done, not the clock (tests/support/work_budget.py)
        code, out, err = run_checker(capsys, tmp_path, deployment)
        assert_bad_input(code, out, err)
        assert "at most 10000 pods per workload" in err


@pytest.mark.parametrize(
    "stack",
    [
        "- a\n- b\n",
        "config:\n  1: 2\n",
        "config: [1, 2]\n",
        "config:\n  gpulab:tenants: 5\n",
        "config:\n  gpulab:tenants:\n" + "    - " + "[" * 1000 + "\n",
        "\xff".encode("latin-1"),
        "config:\n  x: &x [1]\n" + ALIAS_BOMB.replace("\n", "\n  ").replace("a: &a", "  a: &a", 1),
    ],
    ids=["list", "integer-keys", "config-list", "tenants-int", "deep", "non-utf8", "alias-bomb"],
)
def test_bad_stack_files_are_bad_input(capsys, tmp_path, stack) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.dev.yaml").write_bytes(stack if isinstance(stack, bytes) else stack.encode())
    with work_budget(REFUSAL_CALLS):  # bounded by the work done, not the clock (tests/support/work_budget.py)
        assert_bad_input(*run_checker(capsys, tmp_path, pod_yaml(), project_dir=project), one_line=False)


# The same inputs through the policy pack: a violation naming the problem, never an exception.


@pytest.mark.parametrize(
    "limits",
    [{"nvidia.com/gpumem": value} for value in ("1.2.3", ".", "1" * 400)]
    + [{"nvidia.com/gpumem": ["x"]}, {"nvidia.com/gpumem": None}, ["not", "a", "map"], "text"],
)
def test_pack_reports_bad_requests_as_violations(limits) -> None:
    messages = [m for m, _ in gpu_violations([inventory_configmap(), pack_pod("bad", limits)])]
    assert any("InvalidGpuRequest" in m for m in messages), messages


def test_pack_bounds_replicas() -> None:
    from policy_harness import resource

    deployment = resource(
        "kubernetes:apps/v1:Deployment",
        {
            "metadata": {"name": "d", "namespace": "gpu-workloads", "labels": {"gpulab.io/tenant": "tenant-a"}},
            "spec": {
                "replicas": 100_000_000,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "1"}}}]}
                },
            },
        },
    )
    with work_budget(REFUSAL_CALLS):  # bounded by the work done, not the clock (tests/support/work_budget.py)
        messages = [m for m, _ in gpu_violations([inventory_configmap(), deployment])]
        assert any("InvalidGpuRequest" in m and "at most 10000" in m for m in messages), messages


# Fuzz: arbitrary values in every field a manifest or stack file has.

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True), st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
quantities = st.one_of(values, st.from_regex(r"[+-]?[0-9.]{0,6}([eE][+-]?[0-9]{0,3}|[KMGTPE]i?|[mk])?", fullmatch=True))


@st.composite
def manifests(draw) -> dict:
    limits = draw(
        st.one_of(
            values,
            st.dictionaries(
                st.sampled_from(
                    ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"]
                ),
                quantities,
            ),
        )
    )
    container = draw(
        st.one_of(
            values,
            st.fixed_dictionaries(
                {"name": values, "resources": st.one_of(values, st.fixed_dictionaries({"limits": st.just(limits)}))}
            ),
        )
    )
    return {
        "kind": draw(st.one_of(st.sampled_from(["Pod", "Deployment", "Job", "CronJob", "List"]), values)),
        "metadata": draw(
            st.one_of(values, st.fixed_dictionaries({"name": values, "labels": values, "annotations": values}))
        ),
        "spec": draw(
            st.one_of(
                values,
                st.fixed_dictionaries(
                    {
                        "replicas": values,
                        "containers": st.one_of(values, st.lists(st.just(container), max_size=3)),
                        "template": values,
                    }
                ),
            )
        ),
        "items": draw(values),
    }


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(manifests())
def test_fuzz_checker_never_crashes(capsys, tmp_path, manifest) -> None:
    import json

    with work_budget(10 * 691_000):  # any manifest: at most ten times the largest one allowed (10,000 replicas)
        code, out, err = run_checker(capsys, tmp_path, json.dumps(manifest, allow_nan=True))
        assert code in (0, 1, 2), (code, out, err)
        assert "Traceback" not in out + err


@settings(max_examples=200, deadline=None, derandomize=True)
@given(manifests())
def test_fuzz_pack_never_raises(manifest) -> None:
    from policy_harness import resource

    props = {key: value for key, value in manifest.items() if key != "kind"}
    messages = gpu_violations([inventory_configmap(), resource("kubernetes:core/v1:Pod", props)])
    assert all(isinstance(m, str) for m, _ in messages)


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(
        st.one_of(
            st.sampled_from(["gpulab:tenants", "gpulab:management", "gpulab:versions", "gpulab:scheduling"]),
            st.text(max_size=10),
        ),
        values,
        max_size=4,
    )
)
def test_fuzz_stack_files(capsys, tmp_path, config) -> None:
    import yaml

    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": config}))
    code, out, err = run_checker(capsys, tmp_path, pod_yaml(), project_dir=project)
    assert code in (0, 1, 2) and "Traceback" not in out + err


def test_names_with_lone_surrogates_are_printed_not_crashed_on(capsys, tmp_path) -> None:
    """Found by the fuzz test: JSON escapes of a non-BMP character reach YAML as two lone surrogates,
    which the old code could not print (UnicodeEncodeError)."""
    text = '{"kind": "Pod", "metadata": {"name": "\\ud800\\udc00"}, "spec": []}'
    code, out, err = run_checker(capsys, tmp_path, text)
    assert_bad_input(code, out, err)
    assert "\\ud800" in err
