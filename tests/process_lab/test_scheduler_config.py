"""The tenant's kube-scheduler configuration with HAMi as extender (process_lab/hami_scheduler.py), held to what
kube-scheduler v1.36.4 validates (pkg/scheduler/apis/config/validation/validation.go: podInitialBackoffSeconds
above 0, podMaxBackoffSeconds not below it). The real kube-scheduler reads it in tests/real/test_process_lab.py.
"""

from __future__ import annotations

import yaml

from process_lab.hami_scheduler import MANAGED_RESOURCES, POD_MAX_BACKOFF_SECONDS, SCHEDULER_NAME, scheduler_config


def test_hamis_profile_and_extender_and_a_backoff_kube_scheduler_takes() -> None:
    config = yaml.safe_load(scheduler_config(40123))
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler", SCHEDULER_NAME]
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "https://127.0.0.1:40123" and extender["bindVerb"] == "bind"
    assert {r["name"] for r in extender["managedResources"]} == set(MANAGED_RESOURCES)
    initial, most = config["podInitialBackoffSeconds"], config["podMaxBackoffSeconds"]
    assert initial > 0 and most >= initial
    assert most == POD_MAX_BACKOFF_SECONDS < 10  # below kube-scheduler's default: a lock-refused bind retried soon
