"""Runs a program as a pod's container would see a node container's network: in a network namespace of its own
(where net.netfilter.nf_conntrack_max is read-only, as in any namespace but the host's: the kernel makes it 0444
there, net/netfilter/nf_conntrack_standalone.c), with files where the pod's volumes would put them, and the API
server reachable on this namespace's loopback.

Started as root by tests/real/test_kube_proxy.py, already inside `unshare --net --mount` (a private mount namespace,
so what it mounts is gone with it):

    python -m tests.real.netns_run --files DIR --socket PATH --port PORT -- PROGRAM ARGS...

- every file DIR/<path> appears at /<path>, on tmpfs mounted over /var/lib and /run (DIR's top folders must be those;
  /var/run is /run);
- 127.0.0.1:PORT inside the namespace relays to the unix socket PATH, which the test serves from the host's
  network namespace (a socket file, unlike a TCP port, is reachable from any network namespace);
- PROGRAM runs as a child; this process ends with its exit status, and ends it on TERM.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from process_lab.forward import pipe

MOUNTED = ("var/lib", "run")  # tmpfs over each: nothing of the host's is written


async def relay_tcp_to_unix(port: int, socket_path: str, started: threading.Event) -> None:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", port)
    started.set()
    async with server:
        await server.serve_forever()


def place_files(files: Path) -> None:
    for folder in MOUNTED:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", f"/{folder}"], check=True)
    for source in sorted(path for path in files.rglob("*") if path.is_file()):
        relative = source.relative_to(files)
        if not any(str(relative).startswith(f"{folder}/") for folder in MOUNTED):
            raise SystemExit(f"{relative}: only files under {', '.join(MOUNTED)} can be placed")
        target = Path("/") / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.real.netns_run")
    parser.add_argument("--files", type=Path, required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    place_files(args.files)
    started = threading.Event()
    relay = threading.Thread(
        target=lambda: asyncio.run(relay_tcp_to_unix(args.port, args.socket, started)), daemon=True
    )
    relay.start()
    if not started.wait(30):
        print("the relay did not start", file=sys.stderr)
        return 2
    child = subprocess.Popen(program)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
