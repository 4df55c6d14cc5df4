"""Targets and links: how a coordinator names and reaches its participants (HATP-MCP-26)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.links import Target, open_links

pytestmark = pytest.mark.anyio


def test_HATP_MCP_26_a_target_is_an_http_url_or_a_stdio_module_with_its_data_dir() -> None:
    assert Target.parse("http://127.0.0.1:8000/mcp") == Target(url="http://127.0.0.1:8000/mcp")
    assert Target.parse("stdio:servers.hotel:/var/hotel") == Target(module="servers.hotel", data="/var/hotel")
    assert Target.parse("stdio:servers.hotel") == Target(module="servers.hotel")
    obj = {"module": "servers.payments", "data": "/p", "args": ["--commit-delay", "2"]}
    assert Target.parse(obj) == Target(module="servers.payments", data="/p", args=("--commit-delay", "2"))
    assert Target.parse({"url": "http://x/mcp"}).describe() == "http://x/mcp"


@pytest.mark.parametrize("bad", ["ftp://x", "stdio:", "servers.hotel", {"module": "m", "args": "--x"}, {}])
def test_HATP_MCP_26_anything_else_is_not_a_target(bad: object) -> None:
    with pytest.raises(ValueError, match=r"target|args"):
        Target.parse(bad)  # type: ignore[arg-type]


async def test_HATP_MCP_26_a_server_that_cannot_be_reached_is_no_answer_not_a_refusal(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with open_links({"nobody": Target(url="http://127.0.0.1:9/mcp")}, tmp_path) as links:
            with pytest.raises(HatpError) as info:
                await links["nobody"].client()
    assert (info.value.rule, info.value.code) == ("HATP-MCP-6", "UNREACHABLE")
