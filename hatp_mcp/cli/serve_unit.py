"""`hatp serve --org DIR --install [--enable]`: the service as a systemd user unit (HATP-MCP-61).

It writes `$XDG_CONFIG_HOME/systemd/user/hatp-NAME.service` (`~/.config` when XDG_CONFIG_HOME is unset; NAME is the
organisation folder's name), which runs `python -m hatp_mcp.cli serve --org DIR` with `Restart=on-failure`, and
prints how to enable it. It never runs systemctl unless told `--enable` (then `systemctl --user daemon-reload` and
`systemctl --user enable --now` the unit), and never overwrites a different unit of that name: a unit another
organisation folder of the same name installed stays as it is, and the command says so.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail

__all__ = ["install_unit", "unit_name", "unit_path", "unit_text"]


def unit_name(root: Path) -> str:
    """`hatp-NAME.service`, NAME the organisation folder's name in lower case, anything but letters, digits and
    `-` turned into `-`."""
    slug = re.sub(r"[^a-z0-9-]+", "-", root.name.lower()).strip("-") or "org"
    return f"hatp-{slug}.service"


def unit_path(root: Path, env: Mapping[str, str]) -> Path:
    """Where systemd looks for the user's own units: `$XDG_CONFIG_HOME/systemd/user` (`~/.config` without it)."""
    config = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config) / "systemd" / "user" / unit_name(root)


def _quoted(arg: str) -> str:
    """One word of ExecStart, as systemd reads it: in double quotes, with `\\`, `"`, `%` and `$` escaped."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def unit_text(python: str, root: Path, agent: str | None = None) -> str:
    """The unit: `hatp serve --org ROOT` (with `--agent`), restarted when it fails, stopped by SIGTERM (which stops
    every child, HATP-MCP-41), started with the user's session (`default.target`)."""
    cmd = [python, "-m", "hatp_mcp.cli", "serve", "--org", str(root), *(["--agent", agent] if agent else [])]
    return "\n".join(
        [
            "[Unit]",
            f"Description=HATP service of the organisation at {str(root).replace('%', '%%')}",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={' '.join(_quoted(a) for a in cmd)}",
            "Restart=on-failure",
            "RestartSec=5",
            "KillSignal=SIGTERM",
            "TimeoutStopSec=60",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def install_unit(root: Path, python: str, agent: str | None, enable: bool, env: Mapping[str, str]) -> int:
    """Write the unit (HATP-MCP-61) and print how to enable it; with `enable`, enable and start it. Exit 2 when a
    different unit of that name is there (left unchanged), 1 when systemctl failed."""
    path = unit_path(root, env)
    text = unit_text(python, root, agent)
    existing = path.read_text() if path.is_file() else None
    if existing is not None and existing != text:  # never overwrite another unit
        return fail(
            f"{path} exists and runs something else (HATP-MCP-61); it was left as it is. Remove it "
            "(systemctl --user disable --now " + path.name + "; rm " + str(path) + ") or rename this organisation "
            "folder, then install again",
            EXIT_BAD_INPUT,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    if existing is None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    print(f"hatp serve: wrote {path}", file=sys.stderr)
    steps = [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", path.name]]
    if not enable:
        print("to start it now and with every login:")
        for step in steps:
            print("  " + " ".join(step))
        print(f"  loginctl enable-linger {env.get('USER', '$USER')}   # optional: keep it running after logout")
        return EXIT_OK
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            return fail(f"{' '.join(step)} failed: {said[-1] if said else done.returncode}", EXIT_PROBLEMS)
    print(f"hatp serve: {path.name} enabled and started (systemctl --user status {path.name})", file=sys.stderr)
    return EXIT_OK
