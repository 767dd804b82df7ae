"""What process mode's dynamic resources share: how each reads its control plane from its props, what a refresh
observes, when a change replaces a resource or starts it again, and objects deleted where the API server still
answers.

Each resource of process mode is a Pulumi dynamic resource whose provider runs process_lab's code (the same code
`make test-real` runs) in the engine's Python provider process. That process lives in a process group the engine
kills when it closes the provider (pulumi sdk/go/common/util/cmdutil: RegisterProcessGroup, KillChildren), so
every program meant to outlive `pulumi up` starts in a session of its own (process_lab.commands). Every delete
finds what to stop from the resource's own state: a later `pulumi destroy` is another process.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pulumi.dynamic import DiffResult, ReadResult

from process_lab.commands import ProcessLabError
from process_lab.control_plane import ControlPlane
from process_lab.stack import TenantProcesses


def control_plane_of(props: dict[str, Any]) -> ControlPlane:
    """The tenant's control plane a resource's props name (process_lab.stack.TenantProcesses)."""
    return TenantProcesses.from_props(props).control_plane


def observed(id_: str, props: dict[str, Any], running: bool) -> ReadResult:
    """What a refresh reads: the resource as it was, with `running` as found. The program always asks for
    running: True, so one found stopped (processes killed by hand, a reboot) differs and is replaced (deleted,
    which clears what is left, then made again) by `make up`; `make down` still deletes it, files included."""
    found = {**props, "running": running}
    return ReadResult(id_=id_, outs=found, inputs=found)


def api_ready(props: dict[str, Any]) -> bool:
    """Whether the tenant's API server answers now (process_lab.control_plane ControlPlane.answers)."""
    return control_plane_of(props).answers()


def read_in_cluster(id_: str, props: dict[str, Any], *args: str) -> ReadResult:
    """A resource that is objects in the tenant's API server: found stopped only when that server answers and
    `kubectl ARGS` fails. With the server down its objects are still in etcd, and the control plane's own read
    decides what happens to them (started again on its data, or made anew, which makes these anew too):
    a refresh never drops nodes whose pods a user made because their API server was down at that moment."""
    if not api_ready(props):
        return ReadResult(id_=id_, outs=props, inputs=props)
    try:
        found = control_plane_of(props).kubectl(*args, check=False, timeout=10).returncode == 0
    except ProcessLabError:
        found = False
    return observed(id_, props, found)


def changed_keys(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    # `control_plane` (which control plane a resource lives in) is newer than process mode's first states: a
    # state written before it lacks it, which is no change.
    return [key for key in keys if olds.get(key) != news.get(key) and not (key == "control_plane" and key not in olds)]


def replace_or_restart(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...], restart: bool) -> DiffResult:
    """A change of any of `keys` replaces the resource (processes are restarted, never patched in place), but a
    resource found stopped (`running`) and nothing else is brought back in place when `restart` says it can be
    (an update): what it holds is kept."""
    changed = changed_keys(olds, news, keys)
    if changed == ["running"] and restart:
        return DiffResult(changes=True, replaces=[], delete_before_replace=True)
    return DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=True)


def instance_of(kubeconfig: str | None) -> str:
    return hashlib.sha256((kubeconfig or "").encode()).hexdigest()[:16]


def delete_in_cluster(props: dict[str, Any], *objects: str) -> None:
    """Delete objects in the tenant's API server where it still answers. Every object lives only in that
    control plane's etcd, which its own delete removes: an API server killed by hand or gone with a reboot
    (connection refused) must not stop `make down`."""
    control_plane = control_plane_of(props)
    if control_plane.kubeconfig.exists():
        control_plane.kubectl("delete", "--ignore-not-found", *objects, check=False, timeout=20)
