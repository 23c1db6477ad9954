"""Gates: where the scripted runner, the fake CLI and the test connectors wait for a test.

Something that reaches gate `g` writes `g.reached` in the gate directory and
waits until the file `g` exists; a test waits for the first and writes the second.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


async def gate_reached(gate_dir: Path, gate: str, timeout: float) -> None:
    """Wait until something stopped at `gate` (polled, with a deadline)."""
    async with asyncio.timeout(timeout):
        while not (gate_dir / f"{gate}.reached").exists():
            await asyncio.sleep(0.02)


def open_gate(gate_dir: Path, gate: str) -> None:
    """Let whatever waits at `gate` go on (and pass it at once from now on)."""
    gate_dir.mkdir(parents=True, exist_ok=True)
    (gate_dir / gate).touch()
