"""The proxy's upstream: exactly the environment its policy file names, secrets from owner-only files, never a
value in an error (hatp_mcp/mcp/proxy_upstream.py, HATP-PXY-2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from hatp_mcp.core.model.proxy_policy import load_policy
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.proxy_upstream import HttpTarget, read_policy, upstream_target

SECRET = "s3cr3t-value-never-shown"


def stdio(env: dict[str, object], tmp_path: Path, environ: dict[str, str] | None = None) -> StdioServerParameters:
    policy = load_policy({"upstream": {"command": "node", "args": ["x.js"], "env": env}})
    target = upstream_target(policy, tmp_path, environ or {})
    assert isinstance(target, StdioServerParameters)
    return target


def refused(env: dict[str, object], tmp_path: Path, environ: dict[str, str] | None = None) -> HatpError:
    with pytest.raises(HatpError) as err:
        stdio(env, tmp_path, environ)
    assert SECRET not in err.value.one_line() and SECRET not in json.dumps(err.value.to_dict())
    return err.value


def test_HATP_PXY_2_the_upstream_gets_exactly_the_variables_the_file_names(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(SECRET + "\n")
    key.chmod(0o600)
    target = stdio(
        {"LITERAL": "v", "FROM_ENV": {"env": "PROXY_TOKEN"}, "FROM_FILE": {"file": "key"}},
        tmp_path,
        {"PROXY_TOKEN": "t", "PROXY_OWN_SECRET": "not for the upstream"},
    )
    assert target.env == {"LITERAL": "v", "FROM_ENV": "t", "FROM_FILE": SECRET}  # nothing else of the proxy's
    assert target.cwd == str(tmp_path) and target.command == "node" and target.args == ["x.js"]


def test_HATP_PXY_2_a_variable_to_take_from_an_unset_one_is_refused(tmp_path: Path) -> None:
    err = refused({"TOKEN": {"env": "PROXY_TOKEN"}}, tmp_path, {})
    assert (err.rule, err.code, err.path) == ("HATP-PXY-2", "ENV_NOT_SET", "upstream.env.TOKEN")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o700, 0o660])
def test_HATP_PXY_2_a_secret_file_others_may_use_is_refused_and_its_value_never_shown(
    tmp_path: Path, mode: int
) -> None:
    key = tmp_path / "key"
    key.write_text(SECRET)
    key.chmod(mode)
    err = refused({"API_KEY": {"file": str(key)}}, tmp_path)
    assert (err.rule, err.code, err.path) == ("HATP-PXY-2", "SECRET_FILE_OPEN", "upstream.env.API_KEY.file")
    assert f"{mode:04o}" in err.reason and "chmod 600" in err.fix
    key.chmod(0o400)
    assert stdio({"API_KEY": {"file": str(key)}}, tmp_path).env == {"API_KEY": SECRET}


def test_HATP_PXY_2_a_missing_secret_file_is_refused(tmp_path: Path) -> None:
    err = refused({"API_KEY": {"file": "absent"}}, tmp_path)
    assert (err.rule, err.code) == ("HATP-PXY-2", "SECRET_FILE_UNREADABLE")


def test_a_policy_file_that_is_not_json_is_refused_naming_it_HATP_PXY_1(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text("{not json")
    with pytest.raises(HatpError) as err:
        read_policy(path)
    assert (err.value.rule, err.value.code) == ("HATP-PXY-1", "BAD_POLICY") and "policy.json" in err.value.reason
    path.write_text(json.dumps({"upstream": {"url": "http://127.0.0.1:9/mcp"}}))
    assert upstream_target(read_policy(path), tmp_path) == "http://127.0.0.1:9/mcp"


def http(headers: dict[str, object], tmp_path: Path, environ: dict[str, str] | None = None) -> object:
    policy = load_policy({"upstream": {"url": "https://mcp.example.com/mcp", "headers": headers}})
    return upstream_target(policy, tmp_path, environ or {})


def test_HATP_PXY_46_an_http_upstream_is_sent_the_headers_the_file_names_each_value_resolved(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("Bearer from-a-file\n")
    key.chmod(0o600)
    headers = {"Authorization": {"file": "key"}, "X-Api-Key": {"env": "API_KEY"}, "X-Team": "travel"}
    target = http(headers, tmp_path, {"API_KEY": "from-the-env", "OTHER": "never-sent"})
    assert isinstance(target, HttpTarget) and target.url == "https://mcp.example.com/mcp"
    assert dict(target.headers) == {
        "Authorization": "Bearer from-a-file",
        "X-Api-Key": "from-the-env",
        "X-Team": "travel",
    }
    assert "from-a-file" not in repr(target) and "from-the-env" not in repr(target)  # never in a log line
    assert http({}, tmp_path) == "https://mcp.example.com/mcp"


def test_HATP_PXY_46_a_header_from_an_unset_variable_or_a_loose_file_is_refused_naming_no_value(tmp_path: Path) -> None:
    with pytest.raises(HatpError) as unset:
        http({"Authorization": {"env": "TOKEN"}}, tmp_path)
    assert (unset.value.rule, unset.value.code, unset.value.path) == (
        "HATP-PXY-2",
        "ENV_NOT_SET",
        "upstream.headers.Authorization",
    )
    loose = tmp_path / "loose"
    loose.write_text("Bearer s3cr3t")
    loose.chmod(0o644)
    with pytest.raises(HatpError) as open_file:
        http({"Authorization": {"file": "loose"}}, tmp_path)
    assert open_file.value.code == "SECRET_FILE_OPEN" and "s3cr3t" not in open_file.value.one_line()
    with pytest.raises(HatpError) as bad_name:
        load_policy({"upstream": {"url": "https://mcp.example.com/mcp", "headers": {"Bad Name": "x"}}})
    assert (bad_name.value.rule, bad_name.value.code) == ("HATP-PXY-1", "BAD_POLICY")
