"""The Human Gateway checks: what any MCP server that claims to be a HATP gateway must do (spec/mcp-binding.md
HATP-MCP-9/10, 17/18, HATP-TRUST-1..4, 8).

The runner is a coordinator (target.py): it asks the gateway for one approval requirement of a plan it builds
(`--address`, `--action`), proven and unproven, and reads the asks back with `hatp/txn/voted`. The humans are
never involved: a pending ask is withdrawn by the runner's abort at the end. A requirement the gateway will not
route is a signed `no` vote, not an error (HATP-MCP-9), and the checks accept it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from mcp import Client

from hatp_mcp.conformance.exchange import Answer
from hatp_mcp.conformance.report import Report
from hatp_mcp.conformance.session import Clock, Session
from hatp_mcp.conformance.target import Identity
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.estimate import EstimateRequest, TightenRequest
from hatp_mcp.core.model.gateway_messages import VotedRequest
from hatp_mcp.core.model.messages import AbortRequest, PrepareRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import CODES, DEFAULT_CODE, INVALID_PARAMS
from hatp_mcp.mcp.extension import read_advertisement

__all__ = ["GatewayOptions", "run_gateway_checks"]

REQUIREMENT = "approve"


class GatewayOptions:
    """The requirement to ask about: its `address` (a human:// address the gateway routes), `action`, and the
    plan's requester (default `human://ORG/hatp-conformance-requester`, ORG the address's)."""

    def __init__(self, address: str, action: str, requester: str | None = None, timeout: float = 20.0) -> None:
        self.address = address
        self.action = action
        org = address.removeprefix("human://").split("/", 1)[0]
        self.requester = requester or f"human://{org}/hatp-conformance-requester"
        self.timeout = timeout


class _Run:
    def __init__(self, session: Session, options: GatewayOptions) -> None:
        self.s = session
        self.options = options

    def plan(self) -> Plan:
        now = self.s.now().replace(microsecond=0)
        return Plan.model_validate(
            {
                "hatp": "1",
                "txnId": self.s.next_txn_id(),
                "createdAt": format_ts(now),
                "requester": {"principal": self.options.requester, "agent": "agent://conformance"},
                "summary": "hatp conformance run: please ignore, it is withdrawn at once",
                "deadlines": {"decideBy": format_ts(now + timedelta(hours=1))},
                "approvals": [{"id": REQUIREMENT, "address": self.options.address, "action": self.options.action}],
                "branches": [
                    {
                        "branchId": "b1",
                        "participant": "mcp://conformance.example/hatp",
                        "operation": "conformance.noop",
                        "tier": "final",
                        "args": {},
                    }
                ],
            }
        )

    def ask(self, plan: Plan, **changes: Any) -> dict[str, Any]:
        req = PrepareRequest(
            txn_id=plan.txn_id,
            branch_id=REQUIREMENT,
            plan_digest=plan.digest(),
            plan=plan,
            coordinator=self.s.identity.coordinator,
        )
        return {**req.wire(), **changes}

    def abort(self, plan: Plan) -> dict[str, Any]:
        return AbortRequest(
            txn_id=plan.txn_id, branch_id=REQUIREMENT, plan_digest=plan.digest(), reason="conformance"
        ).wire()

    async def voted(self, plan: Plan) -> Answer:
        return await self.s.send("hatp/txn/voted", VotedRequest(txn_id=plan.txn_id, requirement_id=REQUIREMENT).wire())

    async def nothing_asked(self, plan: Plan) -> tuple[bool, str]:
        got = await self.voted(plan)
        return got.error_data.get("code") == "NO_SUCH_ASK", f"voted: {got.describe()}"

    def vote_problem(self, result: dict[str, Any] | None, plan: Plan) -> str | None:
        if result is None:
            return "no VoteResult"
        vote = result.get("vote")
        problem = self.s.signature_problem(vote, "gateway", "$.vote")
        if problem is not None or not isinstance(vote, dict):
            return problem
        want = {"txnId": plan.txn_id, "branchId": REQUIREMENT, "planDigest": plan.digest()}
        for name, value in want.items():
            if vote.get(name) != value:
                return f"vote.{name} is {vote.get(name)!r}, not {value!r}"
        if vote.get("decision") == "pending" and not vote.get("decideBy"):
            return "a pending vote without its signed decideBy"
        if vote.get("decision") == "yes" and not isinstance(result.get("approval"), dict):
            return "a yes vote without its Approval"
        if isinstance(result.get("approval"), dict):
            return self.s.signature_problem(result["approval"], "gateway", "$.approval")
        return None

    async def refused(
        self, rule: str, name: str, method: str, params: dict[str, Any], sent: str, code: str, plan: Plan
    ) -> None:
        """A planted violation: refused with `code` and nothing asked."""
        got = await self.s.send(method, params)
        if code.startswith("HATP-OBJ"):
            ok, number = got.code == INVALID_PARAMS and got.error_data.get("rule") == code, INVALID_PARAMS
        else:
            number = CODES.get(code, DEFAULT_CODE)
            ok = got.code == number and got.error_data.get("code") == code
        none, after = await self.nothing_asked(plan)
        expected = f"error {number} ({code}); nothing asked (voted: NO_SUCH_ASK)"
        self.s.check(rule, name, sent, expected, f"{got.describe()}; {after}", ok and none)

    def advertisement(self) -> bool:
        rule, name = "HATP-MCP-1", "the server advertises HATP as a gateway, with its keys"
        expected = "extensions['ai.probita/human-gateway'] (or experimental['hatp']) revision 1, role gateway"
        try:
            hatp = read_advertisement(self.s.client.server_capabilities, "the gateway")
        except HatpError as exc:
            return self.s.check(rule, name, "initialize / server/discover", expected, exc.reason, False)
        problems = self.s.learn_keys(hatp.get("keys"))
        if "gateway" not in (hatp.get("roles") or []):
            problems.append(f"roles {hatp.get('roles')!r} lack 'gateway'")
        got = "; ".join(problems) or f"roles {hatp.get('roles')}, {len(self.s.keyring)} key(s)"
        return self.s.check(rule, name, "initialize / server/discover", expected, got, not problems)

    async def run(self) -> None:
        if not self.advertisement():
            self.s.skip("HATP-MCP-9", "every other check", "the server does not advertise HATP as a gateway")
            return
        plan = self.plan()
        none, after = await self.nothing_asked(plan)
        self.s.check(
            "HATP-MCP-10",
            "hatp/txn/voted about an ask never given is refused, never a made-up vote",
            "hatp/txn/voted for a txnId the gateway never saw",
            "the refusal NO_SUCH_ASK",
            after,
            none,
        )
        params = self.ask(plan)
        await self.refused(
            "HATP-OBJ-3",
            "an ask with a member the protocol does not define is refused as invalid params",
            "hatp/txn/prepare",
            self.s.sign("prepare", {**params, "conformanceUnknown": 1}),
            "a signed prepare with an extra member conformanceUnknown",
            "HATP-OBJ-3",
            plan,
        )
        await self.refused(
            "HATP-TRUST-1",
            "an ask without the coordinator's auth is refused and asks no one",
            "hatp/txn/prepare",
            params,
            "a well-formed prepare with no auth",
            "COORDINATOR_UNPROVEN",
            plan,
        )
        await self.refused(
            "HATP-TRUST-2",
            "an ask signed by a coordinator key the gateway does not trust is refused",
            "hatp/txn/prepare",
            self.s.sign("prepare", params, key=SigningKey.generate(["coordinator"])),
            f"a prepare whose auth names {self.s.identity.coordinator} but is signed by another key",
            "COORDINATOR_UNPROVEN",
            plan,
        )
        await self.refused(
            "HATP-TRUST-3",
            "an abort's auth replayed on an ask is refused",
            "hatp/txn/prepare",
            {**params, "auth": self.s.sign("abort", self.abort(plan))["auth"]},
            "a prepare carrying the auth signed for hatp/txn/abort of the same requirement",
            "AUTH_MISMATCH",
            plan,
        )
        await self.refused(
            "HATP-TRUST-4",
            "an ask whose auth expired is refused",
            "hatp/txn/prepare",
            self.s.sign("prepare", params, at=self.s.now() - timedelta(minutes=10)),
            "a prepare whose auth was issued 10 minutes ago (lifetime 5 minutes)",
            "AUTH_EXPIRED",
            plan,
        )
        wrong = self.plan()
        await self.refused(
            "HATP-MCP-9",
            "an ask whose planDigest is not the plan's is refused and asks no one",
            "hatp/txn/prepare",
            self.s.sign("prepare", self.ask(wrong, planDigest="sha256:" + "0" * 64)),
            "a signed prepare whose planDigest is sha256:000...0",
            "PLAN_MISMATCH",
            wrong,
        )
        quote = self.plan()
        await self.refused(
            "HATP-MCP-9",
            "a quote is refused: a gateway does not quote",
            "hatp/txn/prepare",
            self.s.sign("prepare", self.ask(quote, quoteOnly=True)),
            "a signed prepare with quoteOnly true",
            "UNSUPPORTED",
            quote,
        )
        await self.flow(plan, params)

    async def flow(self, plan: Plan, params: dict[str, Any]) -> None:
        got = await self.s.send("hatp/txn/prepare", self.s.sign("prepare", params))
        problem = self.vote_problem(got.result, plan)
        self.s.check(
            "HATP-MCP-9",
            "a proven ask is answered at once with the gateway's signed vote",
            "a signed prepare of the requirement",
            "a VoteResult whose vote (pending with decideBy, yes with an Approval, or no) is signed by an advertised"
            " gateway key and names the txnId, requirement and plan digest",
            got.describe() + (f"; {problem}" if problem else ""),
            problem is None,
        )
        if got.result is None or problem is not None:
            self.s.skip("HATP-MCP-10", "ask checks", "no signed vote to follow")
            return
        first = got.result["vote"]
        await self.estimate_flow(plan)
        again = await self.s.send("hatp/txn/prepare", self.s.sign("prepare", self.ask(plan)))
        same = (again.result or {}).get("vote") == first
        self.s.check(
            "HATP-MCP-9",
            "asking again returns the same signed vote",
            "the same prepare again (a fresh auth)",
            "the same signed vote, byte for byte",
            "the same vote" if same else f"another answer: {again.describe()}",
            same,
        )
        first = await self.tighten_flow(plan, first)  # the ask's vote from here on
        unproven = await self.s.send("hatp/txn/abort", self.abort(plan))
        still = await self.voted(plan)
        kept = (still.result or {}).get("vote") == first
        self.s.check(
            "HATP-TRUST-8",
            "an abort without the coordinator's auth is refused and withdraws nothing",
            "an abort of the ask with no auth",
            "error -32080 (COORDINATOR_UNPROVEN); voted still answers the first vote",
            f"{unproven.describe()}; voted: {still.describe()}",
            unproven.code == CODES["COORDINATOR_UNPROVEN"] and kept,
        )
        aborted = await self.s.send("hatp/txn/abort", self.s.sign("abort", self.abort(plan)))
        vote = (aborted.result or {}).get("vote") or {}
        problem = self.vote_problem(aborted.result, plan)
        if problem is None and first.get("decision") == "pending":
            if (vote.get("decision"), vote.get("code")) != ("no", "WITHDRAWN"):
                problem = f"the vote after withdrawing is {vote.get('decision')} {vote.get('code')}"
        elif problem is None and vote.get("decision") != first.get("decision"):
            problem = f"a decided ask changed its decision: {first.get('decision')} -> {vote.get('decision')}"
        self.s.check(
            "HATP-MCP-10",
            "a proven abort withdraws a pending ask (signed no, WITHDRAWN) and keeps a decided one's decision",
            "a signed abort of the ask",
            "a signed vote: no WITHDRAWN when it was pending, else the decision it had",
            aborted.describe() + (f"; {problem}" if problem else ""),
            problem is None,
        )

    def tighten(self, plan: Plan, decide_by: str, txn_id: str | None = None) -> dict[str, Any]:
        return TightenRequest(
            txn_id=txn_id or plan.txn_id, requirement_id=REQUIREMENT, plan_digest=plan.digest(), decide_by=decide_by
        ).wire()

    async def estimate_flow(self, plan: Plan) -> None:
        """HATP-MCP-17: a signed Estimate naming the txnId, requirement and plan digest; another digest refused."""
        params = EstimateRequest(
            txn_id=plan.txn_id, requirement_id=REQUIREMENT, plan_digest=plan.digest(), plan=plan
        ).wire()
        got = await self.s.send("hatp/txn/estimate", params)
        estimate = got.result
        problem = self.s.signature_problem(estimate, "gateway", "$")
        want = {"type": "hatp.estimate", "txnId": plan.txn_id, "requirementId": REQUIREMENT}
        want["planDigest"] = plan.digest()
        if problem is None and isinstance(estimate, dict):
            problem = next(
                (f"{k} is {estimate.get(k)!r}, not {v!r}" for k, v in want.items() if estimate.get(k) != v), None
            )
            if problem is None and not isinstance(estimate.get("decideBy"), str):
                problem = "no decideBy"
        self.s.check(
            "HATP-MCP-17",
            "an estimate is the gateway's signed worst case for the requirement of this plan",
            "hatp/txn/estimate of the requirement, with the plan",
            "an Estimate signed by an advertised gateway key naming the txnId, requirement and plan digest, with "
            "decideBy",
            got.describe() if problem is None else f"{got.describe()}; {problem}",
            problem is None,
        )
        wrong = await self.s.send("hatp/txn/estimate", {**params, "planDigest": "sha256:" + "0" * 64})
        self.s.check(
            "HATP-MCP-17",
            "an estimate whose planDigest is not the plan's is refused",
            "hatp/txn/estimate with planDigest sha256:000...0",
            f"error {CODES['PLAN_MISMATCH']} (PLAN_MISMATCH)",
            wrong.describe(),
            wrong.code == CODES["PLAN_MISMATCH"],
        )

    async def tighten_flow(self, plan: Plan, first: dict[str, Any]) -> dict[str, Any]:
        """HATP-MCP-18: tightening an ask never given is refused NO_SUCH_ASK; tightening the pending ask answers a
        pending vote whose signed decideBy is the one sent. Returns the ask's vote afterwards."""
        soon = format_ts(self.s.now().replace(microsecond=0) + timedelta(minutes=30))
        ghost = self.s.sign(
            "tighten", {**self.tighten(plan, soon, f"{plan.txn_id}-never"), "txnId": f"{plan.txn_id}-never"}
        )
        got = await self.s.send("hatp/txn/tighten", ghost)
        self.s.check(
            "HATP-MCP-18",
            "tightening an ask the gateway was never given is refused",
            "a signed hatp/txn/tighten of a txnId never asked about",
            "the refusal NO_SUCH_ASK, never a made-up vote",
            got.describe(),
            got.result is None and got.error_data.get("code") == "NO_SUCH_ASK",
        )
        if first.get("decision") != "pending":
            self.s.skip("HATP-MCP-18", "tightening a pending ask", f"the ask was {first.get('decision')}, not pending")
            return first
        earlier = first.get("decideBy")
        if not (isinstance(earlier, str) and parse_ts(soon) < parse_ts(earlier)):
            self.s.skip("HATP-MCP-18", "tightening a pending ask", f"its decideBy {earlier!r} is not after {soon}")
            return first
        got = await self.s.send("hatp/txn/tighten", self.s.sign("tighten", self.tighten(plan, soon)))
        problem = self.vote_problem(got.result, plan)
        vote = (got.result or {}).get("vote") or {}
        if problem is None and (vote.get("decision"), vote.get("decideBy")) != ("pending", soon):
            problem = f"the vote is {vote.get('decision')} with decideBy {vote.get('decideBy')!r}"
        self.s.check(
            "HATP-MCP-18",
            "tightening the pending ask answers a pending vote whose signed decideBy is the one sent",
            f"a signed hatp/txn/tighten of the ask with decideBy {soon} (before its {earlier})",
            f"a VoteResult: pending, decideBy {soon}, signed by an advertised gateway key",
            got.describe() + (f"; {problem}" if problem else ""),
            problem is None,
        )
        return vote if problem is None else first


async def run_gateway_checks(
    client: Client, identity: Identity, options: GatewayOptions, report: Report, now: Clock
) -> None:
    """Run every gateway check on `client`, adding one result per check to `report`."""
    await _Run(Session(client, identity, report, now, options.timeout), options).run()
