"""The table: rows, their formatting, and the files under `bench/results/`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._machine import Machine

Unit = Literal["s", "ms", "B", "events", "MB", "turns/s", "count"]

RESULTS_DIR = Path(__file__).parent / "results"


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One line of the table: a figure measured in this run, beside its baseline."""

    key: str
    """Which figure of the brief it answers (`1`, `2a`, `5c`, ...)."""
    figure: str
    unit: Unit
    median: float | None
    p95: float | None
    samples: int
    target: str = "—"
    """The target as text, e.g. `≤ 1.10×`; `—` where the design sets none."""
    met: bool | None = None
    """Whether the target was met; None where there is no target or no number."""
    baseline: float | None = None
    """The same figure without dex-agents (or at turn 1), measured in this run."""
    baseline_label: str = ""
    ratio: float | None = None
    """`median / baseline median`, the number a target usually bounds."""
    note: str = ""


@dataclass(kw_only=True)
class Report:
    """Everything a run produced, as printed and as stored."""

    machine: Machine
    started_at: str
    seconds: float = 0.0
    load: tuple[float, float] = (0.0, 0.0)
    """1-minute load average at the start and at the end: other work skews timings."""
    rows: list[Row] = field(default_factory=lambda: [])
    errors: list[str] = field(default_factory=lambda: [])
    """Figures that could not be measured; any makes the run exit non-zero."""
    warnings: list[str] = field(default_factory=lambda: [])
    """Doubts about the numbers that do not stop them (a request left the script)."""
    directory: Path = RESULTS_DIR
    details: dict[str, Any] = field(default_factory=lambda: {})
    """Raw samples and breakdowns, kept in the JSON only."""

    def markdown(self) -> str:
        """The one table, under a header naming the machine, with row notes below."""
        lines = [
            f"## dex-agents bench ({self.started_at}, {self.seconds:.0f} s)",
            "",
            f"Machine: {self.machine.describe()}; 1-minute load average "
            f"{self.load[0]:.2f} at the start, {self.load[1]:.2f} at the end",
            "",
            "| figure | median | p95 | target | baseline (same run) | ratio |",
            "| --- | ---: | ---: | --- | --- | ---: |",
        ]
        for row in self.rows:
            baseline = (
                f"{format_value(row.baseline, row.unit)} ({row.baseline_label})"
                if row.baseline is not None
                else "—"
            )
            mark = "" if row.met is None else (" ✓" if row.met else " ✗ missed")
            ratio = f"{row.ratio:.2f}×" if row.ratio is not None else "—"
            lines.append(
                f"| {row.key}. {row.figure} (n={row.samples}) "
                f"| {format_value(row.median, row.unit)} "
                f"| {format_value(row.p95, row.unit)} "
                f"| {row.target}{mark} | {baseline} | {ratio} |"
            )
        notes = [f"- {row.key}: {row.note}" for row in self.rows if row.note]
        notes += [f"- NOT MEASURED: {error}" for error in self.errors]
        notes += [f"- WARNING: {warning}" for warning in self.warnings]
        if notes:
            lines += ["", *notes]
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        """Write `latest.md` and `latest.json`, the files worth committing."""
        directory = self.directory
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "latest.md").write_text(self.markdown())
        data = {
            "machine": asdict(self.machine),
            "started_at": self.started_at,
            "seconds": round(self.seconds, 1),
            "load_average": self.load,
            "rows": [asdict(row) for row in self.rows],
            "errors": self.errors,
            "warnings": self.warnings,
            "details": self.details,
        }
        (directory / "latest.json").write_text(json.dumps(data, indent=2) + "\n")


def format_value(value: float | None, unit: Unit) -> str:
    """A number with its unit, at a precision the measurement supports."""
    if value is None:
        return "—"
    match unit:
        case "s":
            return f"{value:.3f} s"
        case "ms":
            return f"{value:.1f} ms"
        case "B":
            return f"{value:,.0f} B"
        case "events":
            return f"{value:.0f} events"
        case "MB":
            return f"{value:.1f} MB"
        case "turns/s":
            return f"{value:.2f} turns/s"
        case "count":
            return f"{value:g}"
