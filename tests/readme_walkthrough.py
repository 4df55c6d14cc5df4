"""The README's "From Claude Desktop" walkthrough as commands a test runs exactly as written: its shell blocks, one
command per (continued) line, run by bash with HOME set to the test's directory (the walkthrough's `~/hatp-example`)
and the venv's `hatp` first on PATH. Test code only."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import anyio

__all__ = ["commands", "run"]

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "## From Claude Desktop\n"


def commands() -> list[list[str]]:
    """Each shell block of the walkthrough (up to the next section), as its commands."""
    text = README.read_text()
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ", len(HEADING))]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [[c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip()] for block in blocks]


async def run(command: str, home: Path) -> str:
    """Run one command as the walkthrough's reader would, in `home`; returns its stdout. Fails on a nonzero exit."""
    env = os.environ | {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    done = await anyio.run_process(["bash", "-euc", command], cwd=home, env=env, check=False)
    assert done.returncode == 0, f"README command failed: {command}\n{done.stderr.decode()}"
    return done.stdout.decode()
