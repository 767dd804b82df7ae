"""Registry pulls a `make up` makes, without pre-loading (every node pulls what it runs) and with it
(the host pulls each image once), for 2, 10 and 50 tenants of the reference shape. Counted from the
inventory, offline; docker.io pulls are the ones Docker Hub rate-limits (10 per hour per IP anonymously)."""

from __future__ import annotations

from model.config import parse_config
from model.docker_lab.images import to_load


def config(tenants: int) -> dict:
    return {
        "tenants": [
            {
                "name": f"tenant-{i}",
                "podCidr": "10.244.0.0/16",
                "serviceCidr": "10.96.0.0/16",
                "gpus": [{"model": "L4", "count": 2}],
                "workloads": [{"name": "trainer", "gpumem": 4000, "gpucores": 10}],
            }
            for i in range(tenants)
        ]
    }


def main() -> None:
    print(f"{'tenants':>7} {'naive pulls':>12} {'docker.io':>10} {'pre-loaded':>11} {'docker.io':>10} {'ratio':>6}")
    for tenants in (2, 10, 50):
        lab = parse_config(config(tenants))
        parts = ["management", *(t.name for t in lab.tenants)]
        per_node = [ref for part in parts for ref in to_load(lab, part)]
        unique = set(per_node)
        hub = [ref for ref in per_node if ref.registry == "docker.io"]
        unique_hub = {ref for ref in unique if ref.registry == "docker.io"}
        print(
            f"{tenants:>7} {len(per_node):>12} {len(hub):>10} {len(unique):>11} {len(unique_hub):>10} "
            f"{len(per_node) / len(unique):>5.1f}x"
        )


if __name__ == "__main__":
    main()
