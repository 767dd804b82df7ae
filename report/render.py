"""The allocation report as terminal text and as a PNG chart."""

from __future__ import annotations

from pathlib import Path

from report.model import TenantReport

BAR = 20


def _bar(used: int, total: int) -> str:
    filled = min(BAR, round(BAR * used / total)) if total else 0
    return "#" * filled + "." * (BAR - filled)


def render_text(reports: list[TenantReport]) -> str:
    lines = []
    for report in reports:
        lines.append(f"tenant {report.tenant}")
        if not report.cards:
            lines.append("  (no GPU cards registered)")
        for usage in report.cards:
            card = usage.card
            lines.append(f"  {card.id}  {card.type}  on {usage.node}")
            lines.append(
                f"    memory [{_bar(usage.memory_mb, card.memory_mb)}] {usage.memory_mb:>6} / {card.memory_mb} MB"
            )
            lines.append(f"    cores  [{_bar(usage.cores, card.cores)}] {usage.cores:>6} / {card.cores} %")
            lines.append(f"    pods   {len(usage.pods)} / {card.split_count}: {', '.join(usage.pods) or '-'}")
        if report.pending:
            lines.append(f"  not placed by HAMi: {', '.join(report.pending)}")
        lines.append("")
    return "\n".join(lines)


def render_png(reports: list[TenantReport], path: Path) -> Path:
    """One horizontal bar pair (memory %, cores %) per card, grouped by tenant."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    rows = [(report.tenant, usage) for report in reports for usage in report.cards]
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
        labels.append(f"{tenant}\n{card.id}")
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
