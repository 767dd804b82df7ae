"""A TCP relay from the lab network's gateway to a tenant's API server on loopback, for real nodes.

Why a relay and not kube-apiserver bound to the gateway: kwokctl binds every component of a cluster to one
address (its bindAddress: kwok v0.8.0 pkg/kwokctl/components, `--bind-address=`/`--listen-client-urls=`), so
the gateway would expose etcd too, without authentication, to every pod of every node on the network. The relay
exposes the API server's TLS port alone, bound to the gateway address only (never 0.0.0.0); TLS stays end to
end (the serving certificate names the gateway: kubeApiserverCertSANs).

Usage: python -m process_lab.forward MARKER LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
(MARKER, the tenant's folder, is in the command line so that the tenant's sweep finds the relay.)
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

CONNECT_TIMEOUT = 10  # seconds to reach the API server for one connection
CHUNK = 65536


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copies `reader` to `writer` until either side ends, then closes `writer`."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def serve(listen_host: str, listen_port: int, target_host: str, target_port: int) -> None:
    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            target = asyncio.open_connection(target_host, target_port)
            server_reader, server_writer = await asyncio.wait_for(target, CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    server = await asyncio.start_server(relay, listen_host, listen_port)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    _marker, listen_host, listen_port, target_host, target_port = argv
    asyncio.run(serve(listen_host, int(listen_port), target_host, int(target_port)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
