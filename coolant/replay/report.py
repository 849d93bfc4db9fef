"""Human-readable replay summary (rich tables on stderr): what an operator asks first (scenario S3)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from coolant.replay.run import ReplaySummary

TOP_DEPLOYMENTS = 20


def render_summary(summary: ReplaySummary, console: Console, seconds: float) -> None:
    rate = summary.records / seconds if seconds > 0 else 0.0
    console.print(
        f"[bold]replay[/bold]: {summary.records:,} records in {seconds:.2f} s ({rate:,.0f}/s), "
        f"{summary.invalid:,} invalid, {summary.cooldowns:,} cooldowns, "
        f"{sum(summary.suppressed.values()):,} suppressed, {summary.health_updates:,} health-state changes "
        f"({summary.health_transitions:,} health transitions), backend {summary.backend}"
    )
    for sample in summary.invalid_samples:
        console.print(f"  [red]invalid[/red] {escape(sample)}", highlight=False, soft_wrap=True)
    if summary.invalid > len(summary.invalid_samples):
        console.print(f"  … and {summary.invalid - len(summary.invalid_samples):,} more invalid records")

    outcome = Table(title="what each record did", title_justify="left")
    outcome.add_column("disposition")
    outcome.add_column("records", justify="right")
    for disposition, count in summary.dispositions.most_common():
        outcome.add_row(str(disposition), f"{count:,}")
    reasons = Table(title="cooldowns by reason", title_justify="left")
    reasons.add_column("reason")
    reasons.add_column("cooldowns", justify="right")
    for name, count in summary.reasons.most_common():
        reasons.add_row(name, f"{count:,}")
    for (group, reason), count in sorted(summary.suppressed.items()):
        reasons.add_row(f"suppressed ({group}, {reason})", f"{count:,}")
    console.print(outcome)
    console.print(reasons)

    deps = Table(title=f"deployments (top {TOP_DEPLOYMENTS} by time cooled)", title_justify="left")
    for col in ("deployment", "outcomes", "failures", "probes", "cooldowns", "time cooled (s)"):
        # ids wrap (fold) rather than lose their tail to an ellipsis: two keys often differ only at the end
        deps.add_column(col, justify="left" if col == "deployment" else "right", overflow="fold")
    ranked = sorted(summary.deployments.items(), key=lambda kv: (-kv[1].cooled_seconds, -kv[1].failures, kv[0]))
    for dep, t in ranked[:TOP_DEPLOYMENTS]:
        deps.add_row(dep, f"{t.outcomes:,}", f"{t.failures:,}", f"{t.probes:,}", f"{t.cooldowns:,}",
                     f"{t.cooled_seconds:,.1f}")
    if len(ranked) > TOP_DEPLOYMENTS:
        deps.caption = f"{len(ranked) - TOP_DEPLOYMENTS:,} more deployments not shown"
    console.print(deps)
