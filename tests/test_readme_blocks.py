"""Every fenced Python and shell block of README.md runs as written, offline.

- A ```python block runs as a program (`python program.py`) in a fresh
  directory, with the interpreter of a fresh virtual environment that has the
  built wheel (see `wheel_venv`), `TEMPORAL_ADDRESS` naming the test run's dev
  server, and no API key. `<!-- readme-test: save as NAME -->` before a block
  also saves it as NAME in the directory of every later Python block (an
  agent module the next programs import).
- A ```bash / ```sh / ```shell block runs in bash from the repository root
  with `.venv/bin` on `PATH`, a fresh `DEX_AGENTS_STATE_DIR` per `##` section
  and no API key. `<!-- readme-test: background until "TEXT" -->` starts it in
  a terminal, waits until it prints TEXT, and stops it with Ctrl-C (it must
  exit 0) when its section ends. `<!-- readme-test: terminal ... -->` runs it
  in a terminal and follows the comment's lines: `send LINE` types LINE,
  `expect TEXT` waits until TEXT is printed; then it must exit 0. A ```console
  block's `$ ` lines run the same way, and its other lines are its output.
- A ```text block right after a runnable block (only prose between) is what
  that block must print: the whole output, `...` standing for any text.
- `<!-- readme-test: skip because REASON -->` keeps a block from running; the
  skipped blocks and their reasons must be exactly `SKIPPED`.

A proxy that refuses and records stands in for the internet: nothing may try
it. Every block must exit 0 without a traceback.
"""

from __future__ import annotations

import os
import re
import runpy
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pexpect
import pytest

from dex_agents.temporal import EmbeddedEngine
from dex_agents.testing._refusing_proxy import RefusingProxy
from support.wheel_venv import ROOT, WheelVenv, scrubbed_env

README = ROOT / "README.md"
PROJECT_BIN = ROOT / ".venv" / "bin"
SHELLS = frozenset({"bash", "sh", "shell", "console"})
RUNNABLE = SHELLS | {"python"}

SKIPPED = {
    "The two commands: make demo   # the main job: a support agent with a read "
    "tool, a refund that waits for approval,": "`make test` is the suite this test "
    "runs in; `make demo` runs in the Quickstart",
    "Development: make test          # lint (ruff), types (pyright), every test": (
        "these run the suite this test runs in, and the 10-minute benchmark"
    ),
}
"""Blocks that do not run (`heading: first line`), and why, as the README says."""

_FENCE = re.compile(r"^```(\S*)\s*$")
_DIRECTIVE = re.compile(r"<!--\s*readme-test:(.*?)-->", re.DOTALL)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")


@dataclass(kw_only=True)
class Block:
    """One fenced block of the README and what the README says about it."""

    section: str
    """The `##` heading it is under."""
    heading: str
    """The nearest heading (`##` or `###`)."""
    lang: str
    code: str
    line: int
    """The line of its opening fence (1-based)."""
    directive: str | None = None
    output: str | None = None
    """The ```text block documenting what it prints."""
    saved_before: list[Block] = field(default_factory=lambda: [])

    @property
    def key(self) -> str:
        first = self.code.strip().splitlines()[0] if self.code.strip() else ""
        return f"{self.heading}: {first}"

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.key})"

    @property
    def skip_reason(self) -> str | None:
        if self.directive and self.directive.startswith("skip because "):
            return self.directive.removeprefix("skip because ").strip()
        return None

    @property
    def saved_as(self) -> str | None:
        if self.directive and self.directive.startswith("save as "):
            return self.directive.removeprefix("save as ").strip()
        return None


def parse_readme(text: str) -> list[Block]:
    """The runnable blocks of `text`, with their directives and outputs.

    Raises:
        AssertionError: A directive is not before a runnable block, or a
            ```text block documents no block.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    section = heading = ""
    pending: str | None = None
    pending_line = pending_end = 0
    last: Block | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = heading = line[3:].strip()
            last = None
        elif line.startswith("### "):
            heading = line[4:].strip()
            last = None
        if line.lstrip().startswith("<!--") and "readme-test:" in line:
            start = index
            while "-->" not in lines[index]:
                index += 1
            comment = "\n".join(lines[start : index + 1])
            match = _DIRECTIVE.search(comment)
            assert match, f"README.md:{start + 1}: unreadable readme-test comment"
            assert pending is None, f"README.md:{pending_line}: two directives"
            pending, pending_line = match.group(1).strip(), start + 1
            index += 1
            pending_end = index
            continue
        fence = _FENCE.match(line)
        if fence is None:
            index += 1
            continue
        lang = fence.group(1)
        end = index + 1
        while not lines[end].startswith("```"):
            end += 1
        code = "\n".join(lines[index + 1 : end]) + "\n"
        if lang == "text":
            assert pending is None, f"README.md:{pending_line}: a directive on text"
            assert last is not None and last.output is None, (
                f"README.md:{index + 1}: a ```text block documents what the block "
                "before it prints; put it right after a Python or shell block of "
                "the same section"
            )
            last.output = code
            last = None
        elif lang in RUNNABLE:
            if pending is not None:
                assert not any(ln.strip() for ln in lines[pending_end:index]), (
                    f"README.md:{pending_line}: a readme-test comment goes right "
                    "before its block"
                )
            block = Block(
                section=section,
                heading=heading,
                lang=lang,
                code=code,
                line=index + 1,
                directive=pending,
            )
            blocks.append(block)
            pending, last = None, block
        else:
            assert pending is None, f"README.md:{pending_line}: directive on {lang}"
            last = None
        index = end + 1
    assert pending is None, f"README.md:{pending_line}: a directive before no block"
    saved: list[Block] = []
    for block in blocks:
        block.saved_before = list(saved)
        if block.saved_as is not None:
            saved.append(block)
    return blocks


BLOCKS = parse_readme(README.read_text())
RUNS = [b for b in BLOCKS if b.skip_reason is None]
PYTHON = [b for b in RUNS if b.lang == "python"]


def _ids(blocks: list[Block]) -> list[str]:
    """Test IDs: the block's heading, numbered when a heading has several."""
    ids: list[str] = []
    for block in blocks:
        same = [b for b in blocks if b.heading == block.heading]
        ids.append(
            block.heading
            if len(same) == 1
            else f"{block.heading} {same.index(block) + 1}"
        )
    return ids


SECTIONS = sorted(
    {b.section for b in RUNS if b.lang in SHELLS},
    key=lambda s: min(b.line for b in RUNS if b.section == s),
)


def matches(expected: str, actual: str) -> bool:
    """Whether `actual` is `expected`, `...` standing for any text (lines rstripped)."""

    def tidy(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip().splitlines())

    parts = [re.escape(part) for part in tidy(expected).split("...")]
    return re.fullmatch(".*?".join(parts), tidy(actual), re.DOTALL) is not None


def plain(text: str) -> str:
    """Terminal output without escape sequences and carriage returns."""
    return _ANSI.sub("", text)


@pytest.fixture(autouse=True)
def real_cli(cli_path: Path) -> None:
    """Every block runs the bundled CLI: skipped (or failed in CI) without it."""


def test_the_readme_says_how_each_block_runs() -> None:
    assert {b.lang for b in BLOCKS} <= RUNNABLE
    skipped = {b.key: b.skip_reason for b in BLOCKS if b.skip_reason is not None}
    assert skipped == SKIPPED
    for block in RUNS:
        directive = block.directive or ""
        kind = directive.split(None, 1)[0] if directive else "run"
        allowed = {"run", "save"} if block.lang == "python" else {"run"}
        if block.lang in ("bash", "sh", "shell"):
            allowed |= {"background", "terminal"}
        assert kind in allowed, f"{block.where}: unknown directive {directive!r}"
    assert len(PYTHON) >= 4 and SECTIONS, "the README's blocks were found"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("block", PYTHON, ids=_ids(PYTHON))
async def test_python_block_runs_as_a_program(
    block: Block,
    wheel: WheelVenv,
    engine: EmbeddedEngine,
    tmp_path: Path,
    proxy: RefusingProxy,
) -> None:
    for saved in block.saved_before:
        assert saved.saved_as is not None
        (tmp_path / saved.saved_as).write_text(saved.code)
    program = tmp_path / (block.saved_as or "program.py")
    program.write_text(block.code)
    env = scrubbed_env(tmp_path / "home", proxy)
    env["TEMPORAL_ADDRESS"] = engine.address
    done = subprocess.run(
        [str(wheel.python), program.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr, f"{block.where}:\n{done.stderr}"
    expected = block.output if block.output is not None else ""
    assert matches(expected, done.stdout), (
        f"{block.where} printed:\n{done.stdout}\nexpected:\n{expected}"
    )


class Terminal:
    """A block running in a pseudo-terminal; text is matched without escapes."""

    def __init__(self, block: Block, env: dict[str, str], log: Path) -> None:
        self.block = block
        self.child = pexpect.spawn(
            "bash",
            ["-c", block.code],
            env=env,
            cwd=str(ROOT),
            encoding="utf-8",
            dimensions=(50, 250),
        )
        self.child.logfile_read = log.open("w")
        self._raw = ""
        self._pos = 0

    @property
    def text(self) -> str:
        return plain(self._raw)

    def expect(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            found = self.text.find(text, self._pos)
            if found >= 0:
                self._pos = found + len(text)
                return
            if time.monotonic() > deadline or not self._read(0.2):
                raise AssertionError(
                    f"{self.block.where} did not print {text!r}; after the last "
                    f"match:\n{self.text[self._pos :][-3000:]}"
                )

    def _read(self, wait: float) -> bool:
        """Read what is there; False once the process closed its terminal."""
        try:
            self._raw += self.child.read_nonblocking(65536, timeout=wait)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        return True

    def wait_exit(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.2):
            pass
        if self.child.isalive():
            self.child.kill(9)
            self.child.close()
            raise AssertionError(f"{self.block.where} did not exit:\n{self.text}")
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, (
            f"{self.block.where}: signal {self.child.signalstatus}"
        )
        return status

    def stop(self) -> int:
        """Ctrl-C, as a person in that terminal would; the exit status."""
        if self.child.isalive():
            self.child.sendintr()
        return self.wait_exit()


def _commands(block: Block) -> tuple[str, str | None]:
    """The code to run, and the output a ```console block shows for it."""
    if block.lang != "console":
        return block.code, block.output
    commands = [ln[2:] for ln in block.code.splitlines() if ln.startswith("$ ")]
    shown = [ln for ln in block.code.splitlines() if not ln.startswith("$ ")]
    return "\n".join(commands) + "\n", "\n".join(shown) if shown else block.output


def _follow_script(terminal: Terminal, directive: str) -> None:
    for step in directive.splitlines()[1:]:
        verb, _, rest = step.strip().partition(" ")
        match verb:
            case "send":
                terminal.child.sendline(rest)
            case "expect":
                terminal.expect(rest)
            case "":
                pass
            case _:
                raise AssertionError(f"{terminal.block.where}: unknown step {step!r}")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("section", SECTIONS)
async def test_shell_blocks_of_a_section_run_in_order(
    section: str, tmp_path: Path, proxy: RefusingProxy
) -> None:
    env = scrubbed_env(tmp_path / "home", proxy)
    env["PATH"] = f"{PROJECT_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["DEX_AGENTS_STATE_DIR"] = str(tmp_path / "state")
    background: list[Terminal] = []
    try:
        for n, block in enumerate(b for b in RUNS if b.section == section):
            if block.lang not in SHELLS:
                continue
            directive = block.directive or ""
            log = tmp_path / f"block-{n}.log"
            if directive.startswith("background until "):
                until = shlex.split(directive.removeprefix("background until "))[0]
                terminal = Terminal(block, env, log)
                background.append(terminal)
                terminal.expect(until)
                continue
            if directive.startswith("terminal"):
                terminal = Terminal(block, env, log)
                _follow_script(terminal, directive)
                status = terminal.wait_exit()
                assert status == 0, f"{block.where} exited {status}:\n{terminal.text}"
                assert "Traceback" not in terminal.text, terminal.text
                continue
            code, expected = _commands(block)
            done = subprocess.run(
                ["bash", "-eo", "pipefail", "-c", code],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=280,
                check=False,
            )
            out = done.stdout + done.stderr
            log.write_text(out)
            assert done.returncode == 0, f"{block.where} failed:\n{out}"
            assert "Traceback" not in out, f"{block.where}:\n{out}"
            if expected is not None:
                assert matches(expected, done.stdout), (
                    f"{block.where} printed:\n{done.stdout}\nexpected:\n{expected}"
                )
    finally:
        statuses = [(t, t.stop()) for t in reversed(background)]
    for terminal, status in statuses:
        assert status == 0, f"{terminal.block.where} exited {status}:\n{terminal.text}"
        assert "Traceback" not in terminal.text, terminal.text


@pytest.mark.parametrize(
    "session_id",
    ["../../etc", "x" * 300, "日本語/セッション"],
    ids=["dot-dot", "300-chars", "unicode"],
)
def test_the_readme_agent_works_in_a_directory_of_its_own_inside_its_agents_dir(
    session_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dex_agents.claude import ClaudeAgentOptionsContext

    (agent,) = [b for b in BLOCKS if b.saved_as == "support_agent.py"]
    module = tmp_path / "support_agent.py"
    module.write_text(agent.code)
    monkeypatch.chdir(tmp_path)
    options = runpy.run_path(str(module))["options"]
    cwds = {
        options(
            ClaudeAgentOptionsContext(
                flow_id=session_id, turn_id=f"turn-{n}", attempt=n
            )
        ).cwd
        for n in (1, 2)
    }
    (cwd,) = cwds  # the same directory for every segment of the session
    assert isinstance(cwd, str)
    assert Path(cwd).parent == (tmp_path / ".dex-agents" / "agents").resolve()
    assert Path(cwd).is_dir()


def test_blocks_are_found_with_their_outputs() -> None:
    # The parser itself, on a README of its own.
    text = "\n".join(
        [
            "## A",
            "<!-- readme-test: save as m.py -->",
            "```python",
            "X = 1",
            "```",
            "### B",
            "```python",
            "from m import X; print(X)",
            "```",
            "It prints:",
            "```text",
            "1",
            "```",
            "<!-- readme-test: skip because no -->",
            "```bash",
            "false",
            "```",
        ]
    )
    saved, program, skipped = parse_readme(text)
    assert (saved.saved_as, saved.key) == ("m.py", "A: X = 1")
    assert (program.heading, program.output, program.saved_before) == (
        "B",
        "1\n",
        [saved],
    )
    assert (skipped.skip_reason, skipped.section) == ("no", "A")
    assert matches("a\n...\nz", "a\nb\nc\nz")
    assert not matches("a\n...\nz", "a\nb\nc\nzz")
    with pytest.raises(AssertionError, match="documents what the block"):
        parse_readme("## A\n```text\nx\n```\n")
