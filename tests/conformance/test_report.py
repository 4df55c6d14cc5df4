"""The conformance report's verdict: a pass only when every check ran and passed (HATP-CONF-1)."""

from __future__ import annotations

from hatp_mcp.conformance.report import CheckResult, Report


def result(rule: str, verdict: str) -> CheckResult:
    return CheckResult(rule, "a check", "sent", "expected", "got", verdict)  # type: ignore[arg-type]


def test_HATP_CONF_1_a_report_with_every_check_passed_is_a_pass() -> None:
    report = Report("t", "participant", [result("HATP-PART-1", "pass"), result("HATP-MCP-1", "pass")])
    assert report.ok and report.failed_rules() == [] and report.to_json()["ok"] is True
    assert report.to_text().endswith("2 passed, 0 failed, 0 skipped: the server conforms")


def test_HATP_CONF_1_no_checks_at_all_is_not_a_pass() -> None:
    assert not Report("t", "participant").ok


def test_HATP_CONF_1_a_skipped_check_is_not_a_pass() -> None:
    report = Report("t", "participant", [result("HATP-PART-1", "pass"), result("HATP-PART-6", "skipped")])
    assert not report.ok and report.failed_rules() == []
    assert "SKIP HATP-PART-6" in report.to_text()


def test_HATP_CONF_1_a_failed_check_names_its_rule_once_with_what_was_sent_expected_and_got() -> None:
    report = Report(
        "t",
        "participant",
        [result("HATP-TRUST-1", "fail"), result("HATP-TRUST-1", "fail"), result("HATP-PART-1", "pass")],
    )
    assert report.failed_rules() == ["HATP-TRUST-1"]
    text = report.to_text()
    assert "FAIL HATP-TRUST-1" in text and "sent:     sent" in text and "expected: expected" in text
    assert report.to_json()["counts"] == {"pass": 1, "fail": 2, "skipped": 0}
