"""A Kubernetes API client from a kubeconfig held in memory, without its keys ever reaching a file on disk.

The Kubernetes Python client loads `client-key-data` and the other `*-data` fields by writing them to
temporary files in $TMPDIR, removed only by an atexit hook (kubernetes/config/kube_config.py,
_create_temp_file_with_content): TERM or KILL leaves the tenant's client key behind. Here each such field
becomes an anonymous in-memory file (memfd_create), handed to the client as /proc/self/fd/N: the key is in
this process's memory only and goes with it, however it ends. Anything the client still writes itself (the
certificate an exec credential plugin returns) goes to a private directory (mode 0700) removed at exit and
on HUP, INT and TERM; one left by a run killed with KILL is removed by the next run.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import tempfile
import weakref
from pathlib import Path
from typing import Any

# kubeconfig fields with inline data, and the file field the client reads instead (kube_config.py FileOrData).
DATA_FIELDS = {
    "clusters": {"certificate-authority-data": "certificate-authority"},
    "users": {"client-certificate-data": "client-certificate", "client-key-data": "client-key"},
}
PRIVATE_PREFIX = "gpulab-kube."

_private_dir: Path | None = None


def _memory_file(name: str, content: bytes) -> tuple[int, str]:
    """(fd, path) of an anonymous in-memory file holding content; valid in this process while fd is open."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, content)
    return fd, f"/proc/self/fd/{fd}"


def in_memory(kubeconfig: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """A copy of kubeconfig whose inline certificates and keys point at in-memory files, and their fds."""
    copy = {**kubeconfig}
    fds: list[int] = []
    for section, fields in DATA_FIELDS.items():
        entries = []
        inner = "cluster" if section == "clusters" else "user"
        for entry in kubeconfig.get(section) or []:
            body = dict((entry or {}).get(inner) or {})
            for data_key, file_key in fields.items():
                if body.get(data_key):
                    fd, path = _memory_file(file_key, base64.standard_b64decode(body.pop(data_key)))
                    fds.append(fd)
                    body[file_key] = path
            entries.append({**entry, inner: body})
        if section in kubeconfig:
            copy[section] = entries
    return copy, fds


def private_dir() -> Path:
    """This process's private directory for whatever the client still writes; removed at exit and on signals."""
    global _private_dir
    if _private_dir is None:
        remove_stale_private_dirs(Path(tempfile.gettempdir()), PRIVATE_PREFIX)
        _private_dir = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}."))  # mode 0700
        atexit.register(shutil.rmtree, str(_private_dir), True)
        for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(number) in (signal.SIG_DFL, signal.default_int_handler):
                signal.signal(number, _remove_and_exit)
    return _private_dir


def remove_stale_private_dirs(base: Path, prefix: str) -> None:
    """Removes this user's folders `base/<prefix><pid>.*` whose process is gone (it was killed with KILL)."""
    for stale in base.glob(f"{prefix}*"):
        pid = stale.name[len(prefix) :].split(".", 1)[0]
        with contextlib.suppress(OSError):  # gone meanwhile
            if pid.isdigit() and stale.stat().st_uid == os.getuid() and not pid_running(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)


def pid_running(pid: int) -> bool:
    """Whether a process `pid` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_and_exit(number: int, _frame: object) -> None:
    if _private_dir is not None:
        shutil.rmtree(_private_dir, ignore_errors=True)
    raise SystemExit(128 + number)


def api_client(kubeconfig: dict[str, Any]) -> Any:
    """A kubernetes.client.ApiClient for kubeconfig (its current context), keys kept in memory."""
    from kubernetes import config as kube_config

    config, fds = in_memory(kubeconfig)
    try:
        client = kube_config.new_client_from_config_dict(config, temp_file_path=str(private_dir()))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    # The paths stay valid while the client lives: close the memory files with it.
    weakref.finalize(client, _close_all, fds)
    return client


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def self_contained(kubeconfig: str, base: Path) -> str:
    """kubeconfig (YAML) with each file it names (certificate-authority, client-certificate, client-key) carried
    inline as its `*-data` field instead: a copy that works from any folder and machine, and after the files are
    gone. A relative path is taken from `base`, the kubeconfig's own folder, as client-go resolves it
    (tools/clientcmd/loader.go ResolveLocalPaths)."""
    import yaml

    document = yaml.safe_load(kubeconfig)
    for section, fields in DATA_FIELDS.items():
        inner = "cluster" if section == "clusters" else "user"
        for entry in document.get(section) or []:
            body = (entry or {}).get(inner) or {}
            for data_key, file_key in fields.items():
                if body.get(file_key):
                    content = (base / body.pop(file_key)).read_bytes()  # an absolute path stays as it is
                    body[data_key] = base64.standard_b64encode(content).decode()
    return yaml.safe_dump(document, sort_keys=False)
