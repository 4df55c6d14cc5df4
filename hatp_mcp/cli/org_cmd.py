"""`hatp org wrap DIR NAME POLICY [--port N]`: add a third-party MCP server, behind the proxy, to an organisation.

POLICY is a proxy policy file (spec/proxy.md): its upstream is the server (a command the proxy starts over stdio
with exactly the environment the file names, or a streamable HTTP URL), and it says what the proxy does with each
of its tools. The step checks the file as the proxy reads it and records the server in DIR/suite.json
(`wrapped.NAME`: the policy, the proxy's data folder DIR/data/NAME and its port on 127.0.0.1): from then on `hatp
serve --org DIR` runs the proxy as one of its children and `hatp mcp-config --org DIR` prints it as `hatp-NAME`,
bridge and URL (spec/proxy.md HATP-PXY-51, spec/mcp-binding.md HATP-MCP-58). Exit 0 and what to run next on stdout;
1 for a policy or name that is refused (the rule, the path and the fix on stderr; nothing written); 2 for a bad call.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail
from hatp_mcp.cli.org_layout import wrap_server
from hatp_mcp.errors import HatpError

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="org_command", required=True)
    wrap = sub.add_parser("wrap", help="run a third-party MCP server behind the proxy in the organisation's service")
    wrap.add_argument("dir", metavar="DIR", help="the organisation directory (made by hatp init-org)")
    wrap.add_argument("name", metavar="NAME", help="the server's name: hatp connect NAME, hatp-NAME in mcp-config")
    wrap.add_argument("policy", metavar="POLICY", help="the proxy policy file: its upstream and each tool's policy")
    wrap.add_argument("--port", type=int, help="its port on 127.0.0.1 (default: one free now)")


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir).expanduser().absolute()
    if args.port is not None and not 1 <= args.port <= 65535:
        return fail(f"--port {args.port}: a TCP port (1..65535)", EXIT_BAD_INPUT)
    try:
        wrapped = wrap_server(root, args.name, Path(args.policy), args.port)
    except HatpError as exc:
        return fail(exc.one_line(), EXIT_PROBLEMS)
    except OSError as exc:
        return fail(f"{root}: {exc.strerror or exc}", EXIT_BAD_INPUT)
    print(f"wrapped {wrapped.name} in {root}: policy {wrapped.policy}, data {wrapped.data}")
    print(f"  at http://127.0.0.1:{wrapped.port}/mcp once the service runs (hatp serve --org {root})")
    print(f"  check the policy against the live server: hatp proxy check {wrapped.policy}")
    print(f"next: hatp mcp-config --org {root}  (its hatp-{wrapped.name} entries)")
    return EXIT_OK
