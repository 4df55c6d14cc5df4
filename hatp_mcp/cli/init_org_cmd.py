"""`hatp init-org DIR --name ORG`: make an organisation directory (hatp_mcp.cli.org_layout has the layout).

Its Directory and Gateway keys (private/, mode 0600), the well-known document publishing their public halves, empty
cards/ and agents/, an empty private contact book, the gateway's settings (no delivery channel yet; the web inbox
off unless --inbox or --inbox-port turns it on, on localhost), the coordinator's key trusted by every receiver, and
the package's demo tool servers with their keys made now and pinned in trust/. Exit 0 and the next steps on stdout;
1 when DIR already holds an organisation or anything else (HATP-MCP-36: never overwritten, nothing written); 2 for a
bad call.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail
from hatp_mcp.cli.org_layout import OrgLayout, init_org, load_suite
from hatp_mcp.errors import HatpError

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="the new organisation directory (must not exist, or be empty)")
    p.add_argument("--name", required=True, help="the organisation's DNS name, e.g. example.org")
    p.add_argument("--inbox", action="store_true", help="serve the web inbox on localhost (default: off)")
    p.add_argument("--inbox-port", type=int, help="serve the web inbox on this port of localhost")
    p.add_argument("--gateway-port", type=int, help="the gateway's MCP port on 127.0.0.1 (default: one free now)")


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir).expanduser()
    try:
        made = init_org(root, args.name, inbox=args.inbox, inbox_port=args.inbox_port, gateway_port=args.gateway_port)
    except HatpError as exc:
        return fail(exc.one_line(), EXIT_PROBLEMS)
    except ValueError as exc:
        return fail(str(exc), EXIT_BAD_INPUT)
    except OSError as exc:
        return fail(f"{root}: cannot create: {exc.strerror or exc}", EXIT_BAD_INPUT)
    layout, suite = OrgLayout(made), load_suite(made)
    print(f"organisation {suite.organization} in {made}")
    print(f"  Directory key {layout.directory_key} (0600: it signs every card; keep it offline)")
    print(f"  Gateway key   {layout.gateway_key} (0600)")
    inbox = f"http://localhost:{suite.inbox_port}/" if suite.inbox_port is not None else "off (--inbox turns it on)"
    print(f"  web inbox     {inbox}")
    print(f"  gateway MCP   127.0.0.1:{suite.gateway_mcp_port} (the coordinator's link to the one gateway process)")
    print("next: add people and the agent Claude Desktop acts as (hatp card person / hatp card agent --org DIR),")
    print(f"      then: hatp mcp-config --org {made}")
    return EXIT_OK
