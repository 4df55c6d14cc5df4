"""An HTTP upstream that wants a bearer token: the policy file's `headers` (a value from an owner-only file) reach
it on every request, over real processes (spec/proxy.md HATP-PXY-46). The upstream here is a journaling proxy
served over HTTP with a callers file (HATP-JRN-17), which refuses any tool call without a caller's token."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp import MCPError

from hatp_mcp.core.model.proxy_policy import load_policy
from hatp_mcp.mcp.http_callers import hash_token, new_token
from hatp_mcp.mcp.launch import launch_http
from hatp_mcp.mcp.proxy_upstream import HttpTarget, upstream_client, upstream_target

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

UNDO_MAP = {"tools": {"refund": {"undo": "reverse_refund", "arguments": {"item": "/result/item"}}}}


async def test_HATP_PXY_46_an_http_upstream_gets_the_files_authorization_header_and_refuses_without_it(
    tmp_path: Path,
) -> None:
    token = new_token()
    (tmp_path / "callers.json").write_text(json.dumps({"callers": {"agent://a": {"tokenSha256": hash_token(token)}}}))
    (tmp_path / "undo.json").write_text(json.dumps(UNDO_MAP))
    secret = tmp_path / "token"
    secret.write_text(f"Bearer {token}\n")
    secret.chmod(0o600)
    shop = f"cmd:{sys.executable} -m servers.shop --transport stdio --data {tmp_path / 'shop'}"
    extra = ["--upstream", shop, "--undo-map", str(tmp_path / "undo.json"), "--callers", str(tmp_path / "callers.json")]
    with anyio.fail_after(60):
        async with launch_http("servers.journal_proxy", tmp_path / "guarded", extra=extra) as proc:
            with_header = load_policy({"upstream": {"url": proc.url, "headers": {"Authorization": {"file": "token"}}}})
            target = upstream_target(with_header, tmp_path)
            assert isinstance(target, HttpTarget)
            async with upstream_client(target) as client:
                status = await client.call_tool("saga_status", {})
            bare = upstream_target(load_policy({"upstream": {"url": proc.url}}), tmp_path)
            async with upstream_client(bare) as client:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("saga_status", {})
    assert status.structured_content is not None and status.structured_content["refusal"]["code"] == "NO_SAGA"
    assert isinstance(refused.value.data, dict) and refused.value.data["code"] == "CALLER_UNPROVEN"
