"""The allocation report as terminal text and as a PNG chart."""

from __future__ import annotations

from pathlib import Path

from report.model import CardUsage, TenantReport

BAR = 20


def _bar(used: int, total: int) -> str:
    filled = min(BAR, round(BAR * used / total)) if total else 0
    return "#" * filled + "." * (BAR - filled)


def render_text(reports: list[TenantReport]) -> str:
    """Per tenant its cards; a tenant with several GPU nodes gets them grouped under a line per node."""
    lines = []
    for report in reports:
        lines.append(f"tenant {report.tenant}")
        if not report.cards:
            lines.append("  (no GPU cards registered)")
        nodes = list(dict.fromkeys(usage.node for usage in report.cards))
        for node in nodes:
            on_node = [usage for usage in report.cards if usage.node == node]
            indent = "  "
            if len(nodes) > 1:
                memory = sum(u.memory_mb for u in on_node), sum(u.card.memory_mb for u in on_node)
                cores = sum(u.cores for u in on_node), sum(u.card.cores for u in on_node)
                lines.append(
                    f"  node {node}: {len(on_node)} card(s), {memory[0]} / {memory[1]} MB, "
                    f"{cores[0]} / {cores[1]} % cores, {sum(len(u.pods) for u in on_node)} pod(s)"
                )
                indent = "    "
            for usage in on_node:
                lines.extend(indent + line for line in _card_lines(usage, with_node=len(nodes) == 1))
        if report.pending:
            lines.append(f"  not placed by {report.placed_by}: {', '.join(report.pending)}")
        lines.extend(f"  unreadable: {what}" for what in report.unreadable)
        lines.append("")
    return "\n".join(lines)


def _card_lines(usage: CardUsage, with_node: bool) -> list[str]:
    card = usage.card
    return [
        f"{card.id}  {card.type}" + (f"  on {usage.node}" if with_node else ""),
        f"  memory [{_bar(usage.memory_mb, card.memory_mb)}] {usage.memory_mb:>6} / {card.memory_mb} MB",
        f"  cores  [{_bar(usage.cores, card.cores)}] {usage.cores:>6} / {card.cores} %",
        # A DRA card has no slot limit (split_count 0).
        f"  pods   {len(usage.pods)}{f' / {card.split_count}' if card.split_count else ''}: "
        f"{', '.join(usage.pods) or '-'}",
    ]


def render_png(reports: list[TenantReport], path: Path) -> Path:
    """One horizontal bar pair (memory %, cores %) per card, grouped by tenant."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    rows = [(report.tenant, usage) for report in reports for usage in report.cards]
    several = {report.tenant: len({usage.node for usage in report.cards}) > 1 for report in reports}
    height = max(2.5, 0.9 * len(rows) + 1.2)
    figure, axis = plt.subplots(figsize=(10, height))
    labels = []
    for position, (tenant, usage) in enumerate(reversed(rows)):
        card = usage.card
        memory = 100 * usage.memory_mb / card.memory_mb if card.memory_mb else 0
        cores = 100 * usage.cores / card.cores if card.cores else 0
        axis.barh(position + 0.18, memory, height=0.34, color="#4C72B0", label="memory" if position == 0 else None)
        axis.barh(position - 0.18, cores, height=0.34, color="#DD8452", label="cores" if position == 0 else None)
        axis.text(
            101,
            position,
            f"{usage.memory_mb}/{card.memory_mb} MB, {usage.cores}/{card.cores}%, {len(usage.pods)} pod(s)",
            va="center",
            fontsize=8,
        )
        labels.append(f"{tenant}\n{card.id}" + (f"\n{usage.node}" if several[tenant] else ""))
    axis.set_yticks(range(len(rows)), labels, fontsize=8)
    axis.set_xlim(0, 160)
    axis.set_xticks([0, 25, 50, 75, 100])
    axis.set_xlabel("% of card used")
    axis.set_title("gpulab: GPU allocation per card")
    axis.axvline(100, color="grey", linewidth=0.8)
    if rows:
        axis.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
