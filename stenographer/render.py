"""Text rendering for the command line: stage-trace waterfalls and run listings.

Colour (ANSI red for errors and failed runs) only when the caller says the output is a
terminal, so pipes, files and captured output stay plain text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["BAR_WIDTH", "red", "run_line", "waterfall"]

BAR_WIDTH = 40
_RED, _RESET = "\x1b[31m", "\x1b[0m"


def red(text: str, color: bool) -> str:
    return f"{_RED}{text}{_RESET}" if color else text


def waterfall(trace: dict[str, Any], color: bool = False) -> str:
    """A stage trace as a text waterfall: one bar per node, placed at the stage's start
    and scaled to the run's duration; a failed stage shows its error."""
    total = max(float(trace["duration_ms"]), 1e-6)
    failed = trace["status"] != "Completed"
    head = (f"run {trace['run_id']}  graph {trace['graph']}  "
            f"{red(trace['status'], color and failed)}  {trace['duration_ms']:.3f} ms")
    lines = [head]
    offset = 0.0
    for stage in trace["stages"]:
        start = min(BAR_WIDTH - 1, int(BAR_WIDTH * offset / total))
        width = max(1, min(BAR_WIDTH - start, int(BAR_WIDTH * stage["duration_ms"] / total)))
        bar = " " * start + "█" * width
        error = stage.get("error")
        row = (f"  {stage['node']:<12} +{offset:>9.3f} {stage['duration_ms']:>9.3f} ms "
               f"|{bar:<{BAR_WIDTH}}|")
        if error:
            row = red(f"{row}  ERROR {error}", color)
        lines.append(row)
        for channel, summary in stage.get("writes", {}).items():
            lines.append(f"  {'':<12} {'':>23}  {channel} = {summary}")
        offset += stage["duration_ms"]
    return "\n".join(lines)


def run_line(run: dict[str, Any], color: bool = False) -> str:
    """One line of a run listing: id, graph, status, duration, start time (UTC)."""
    started = datetime.fromtimestamp(float(run["started_at"]), UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    status = f"{run['status']:<10}"
    if run["status"] != "Completed":
        status = red(status, color)
    return f"{run['run_id']}  {run['graph']:<16} {status} {run['duration_ms']:>10.3f} ms  {started}"
