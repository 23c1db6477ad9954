"""Runs every figure in one process and prints the table.

The Claude figures go first, while the dev server holds few workflows; the
waiting-sessions figure goes last and gets whatever remains of the time budget,
because it is the one that can always use more time.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from dex_agents.testing._hermetic import bundled_cli_path

from ._claude import ClaudeBench
from ._deltas import delta_latency
from ._history import history_per_turn
from ._machine import describe_machine
from ._report import Report, Row
from ._rig import Progress, Rig, open_rig
from ._turns import concurrent_turns, one_segment_turn, tool_turns
from ._waiting import waiting_sessions
from ._web import web_figures

TIME_LIMIT = 1200.0
"""The whole run must fit in 20 minutes on a 2-core machine (5,000 turns take about 6)."""
WAITING_RESERVE = 75.0
"""Seconds kept back from figure 5's creation budget: resumes, shutdown, slack."""
FIGURES = ("1", "2", "3", "4", "5", "6", "7", "8")

Figure = Callable[[], Awaitable[tuple[list[Row], Any]]]


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m bench`; the exit code is 1 if a figure failed."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Measure dex-agents' overhead; prints one markdown table.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few runs per figure, to try the bench out (numbers are not meaningful)",
    )
    parser.add_argument(
        "--only",
        default=",".join(FIGURES),
        help="comma-separated figures to run (default: all; 2 and 3 run together)",
    )
    args = parser.parse_args(argv)
    only = {f.strip() for f in str(args.only).split(",") if f.strip()}
    unknown = only - set(FIGURES)
    if unknown:
        parser.error(f"unknown figures {sorted(unknown)}; choose from {FIGURES}")
    return asyncio.run(_run(quick=bool(args.quick), only=only))


async def _run(*, quick: bool, only: set[str]) -> int:
    progress = Progress()
    if bundled_cli_path() is None:
        # A `claude` found on PATH would be another CLI, measured by mistake.
        progress.log("the Claude Code CLI bundled with claude-agent-sdk is missing")
        return 2
    report = Report(
        machine=describe_machine(),
        started_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    load_start = os.getloadavg()[0]
    progress.log(f"machine: {report.machine.describe()}; load {load_start:.2f}")
    async with open_rig(progress, quick=quick) as rig:
        await _claude_figures(rig, report, only)
        if "4" in only:
            await _measure(rig, report, "4", lambda: history_per_turn(rig))
        if "6" in only:
            await _measure(rig, report, "6", lambda: delta_latency(rig))
        if "8" in only:
            await _measure(rig, report, "8", lambda: web_figures(rig))
        if "5" in only:
            budget = max(30.0, TIME_LIMIT - WAITING_RESERVE - progress.elapsed)
            progress.log(f"5 waiting sessions: creation budget {budget:.0f} s")
            await _measure(
                rig, report, "5", lambda: waiting_sessions(rig, budget=budget)
            )
        report.warnings += rig.check_hermetic()
        progress.log("stopping the engine")
    report.rows.sort(key=lambda row: row.key)
    report.seconds = progress.elapsed
    report.load = (load_start, os.getloadavg()[0])
    print(report.markdown(), end="")
    if quick or only != set(FIGURES):
        # Only a full run may replace the committed results.
        progress.log("done; a quick or partial run writes no results files")
    else:
        report.write()
        progress.log(f"done; results in {report.directory}")
    return 1 if report.errors else 0


async def _claude_figures(rig: Rig, report: Report, only: set[str]) -> None:
    """Figures 1, 2 + 3 and 7, on one in-process worker for the Claude flow."""
    if not only & {"1", "2", "3", "7"}:
        return
    async with ClaudeBench(rig).serving() as bench:
        if "1" in only:
            await _measure(rig, report, "1", lambda: one_segment_turn(rig, bench))
        if only & {"2", "3"}:
            await _measure(rig, report, "2+3", lambda: tool_turns(rig, bench))
        if "7" in only:
            await _measure(rig, report, "7", lambda: concurrent_turns(rig, bench))


async def _measure(rig: Rig, report: Report, name: str, figure: Figure) -> None:
    """Run one figure; a failure is recorded and the next figure still runs."""
    rig.progress.log(f"figure {name}: start")
    try:
        rows, details = await figure()
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        report.errors.append(f"figure {name}: {type(e).__name__}: {e}")
        rig.progress.log(f"figure {name}: FAILED")
        return
    report.rows.extend(rows)
    report.details[name] = details
    rig.progress.log(f"figure {name}: done")
