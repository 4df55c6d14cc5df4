"""The participant-side checks: what any MCP server that claims to be a HATP participant must do.

The runner is a coordinator (target.py): it builds a one-branch plan on an operation the server advertises, sends
the ordinary flows (quote, prepare, repeat, renew a hold, commit, repeat, compensate, abort, prepare after abort)
signed with its own key, and the planted violations a participant must refuse with no effect: params that are not
the wire object (HATP-OBJ-3), state-changing requests with no proof, a proof by an untrusted key, a stale proof, a
proof replayed for another method (HATP-TRUST-1..4, 8), a commit naming another plan digest (HATP-TRUST-5) or
another vote (HATP-TRUST-7), or a decision that comes before the head its vote answered at (HATP-REC-23); and every
answer must sign the record head it was given (HATP-REC-19). Every vote and receipt that comes back is verified
against the keys the server advertises (HATP-MCP-1, 4). Each check's result says what was sent, what was expected
and what came back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from mcp import Client

from hatp_mcp.conformance.exchange import Answer
from hatp_mcp.conformance.report import Report
from hatp_mcp.conformance.session import Clock, Session
from hatp_mcp.conformance.target import Identity
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Preconditions, RecordHead
from hatp_mcp.core.model.messages import (
    AbortRequest,
    CommitRequest,
    CompensateRequest,
    PrepareRequest,
    RenewRequest,
    StatusRequest,
)
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.core.txn.record import RecordChain
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import CODES, INVALID_PARAMS
from hatp_mcp.mcp.extension import read_advertisement

__all__ = ["ParticipantOptions", "run_participant_checks"]


class ParticipantOptions:
    """What the runner needs to know that the advertisement does not say: the participant's URI (the branch's
    `participant` and the votes' `voter`), which operation to use and its args (`{txn}` in a string is replaced by
    each transaction's id, so every transaction touches its own resource)."""

    def __init__(
        self, uri: str, operation: str | None = None, args: Mapping[str, Any] | None = None, timeout: float = 20.0
    ) -> None:
        self.uri = uri
        self.operation = operation
        self.args = dict(args or {})
        self.timeout = timeout


def _fill(value: Any, txn_id: str) -> Any:
    if isinstance(value, str):
        return value.replace("{txn}", txn_id)
    if isinstance(value, dict):
        return {k: _fill(v, txn_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, txn_id) for v in value]
    return value


class _Run:
    def __init__(self, session: Session, options: ParticipantOptions) -> None:
        self.s = session
        self.options = options
        self.identity = session.identity
        self.operation = ""
        self.tier = ""
        self._chains: dict[str, RecordChain] = {}  # the runner's own record of each plan (by plan digest)

    def check(self, rule: str, name: str, sent: str, expected: str, got: str, passed: bool) -> bool:
        return self.s.check(rule, name, sent, expected, got, passed)

    def skip(self, rule: str, name: str, why: str) -> None:
        self.s.skip(rule, name, why)

    def now(self) -> datetime:
        return self.s.now()

    def sign(
        self, method: str, params: dict[str, Any], *, key: SigningKey | None = None, at: datetime | None = None
    ) -> dict[str, Any]:
        return self.s.sign(method, params, key=key, at=at)

    async def send(self, method: str, params: dict[str, Any]) -> Answer:
        return await self.s.send(method, params)

    def plan(self) -> Plan:
        txn_id = self.s.next_txn_id()
        now = self.now().replace(microsecond=0)
        branch: dict[str, Any] = {
            "branchId": "b1",
            "participant": self.options.uri,
            "operation": self.operation,
            "tier": self.tier,
            "args": _fill(self.options.args, txn_id),
            "maxDurationSeconds": 30,
        }
        if self.tier == "hold":
            branch |= {"leaseSeconds": 120, "holdHorizonSeconds": 600}
        if self.tier == "compensate":
            branch["undoWindowSeconds"] = 3600
        return Plan.model_validate(
            {
                "hatp": "1",
                "txnId": txn_id,
                "createdAt": format_ts(now),
                "requester": {"principal": "human://conformance.example/tester", "agent": "agent://conformance"},
                "summary": "hatp conformance run",
                "deadlines": {"decideBy": format_ts(now + timedelta(hours=1))},
                "branches": [branch],
            }
        )

    def chain(self, plan: Plan) -> RecordChain:
        """The runner's record of `plan`: begun once; a prepare names its head then (HATP-REC-19)."""
        found = self._chains.get(plan.digest())
        if found is None:
            found = self._chains[plan.digest()] = RecordChain(plan, self.identity.key, self.identity.coordinator)
            found.append("txn.begin", format_ts(self.now()))
        return found

    def prepare_params(self, plan: Plan, **changes: Any) -> dict[str, Any]:
        begin = self.chain(plan).events[0]  # every prepare is sent at the head of begin (seq 0)
        req = PrepareRequest(
            txn_id=plan.txn_id,
            branch_id="b1",
            plan_digest=plan.digest(),
            plan=plan,
            coordinator=self.identity.coordinator,
            record_head=RecordHead(seq=0, event_digest=digest(begin)),
        )
        return {**req.wire(), **changes}

    def decision(self, plan: Plan) -> dict[str, Any]:
        """The coordinator-signed commit decision a commit carries (HATP-TRUST-7), after the prepare's head."""
        chain = self.chain(plan)
        for event in chain.events:
            if event.get("event") == "decision":
                return event
        return chain.append("decision", format_ts(self.now()), {"decision": "commit", "reason": "conformance run"})

    def commit_params(self, plan: Plan, prepared: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
        receipt = prepared.get("receipt") or {}
        pre = Preconditions.model_validate(receipt.get("preconditions") or {})
        req = CommitRequest(
            txn_id=plan.txn_id,
            branch_id="b1",
            plan_digest=plan.digest(),
            preconditions=pre,
            decision=self.decision(plan),
            vote_digest=digest(prepared["vote"]),
        )
        return {**req.wire(), **changes}

    def abort_params(self, plan: Plan) -> dict[str, Any]:
        return AbortRequest(txn_id=plan.txn_id, branch_id="b1", plan_digest=plan.digest(), reason="conformance").wire()

    async def state(self, plan: Plan) -> str:
        got = await self.send("hatp/txn/status", StatusRequest(txn_id=plan.txn_id, branch_id="b1").wire())
        if got.result is None:
            return f"status not answered: {got.describe()}"
        return str(got.result.get("state"))

    def evidence_problem(self, obj: Any, kind: str, plan: Plan, phase: str | None = None) -> str | None:
        """Why `obj` is not this participant's signed vote/receipt about this plan's branch, or None."""
        problem = self.s.signature_problem(obj, "participant", f"$.{kind}")
        if problem is not None or not isinstance(obj, dict):
            return problem
        want = {"txnId": plan.txn_id, "branchId": "b1", "planDigest": plan.digest()}
        want["voter" if kind == "vote" else "participant"] = self.options.uri
        if phase is not None:
            want["phase"] = phase
        for name, value in want.items():
            if obj.get(name) != value:
                return f"{kind}.{name} is {obj.get(name)!r}, not {value!r}"
        return None

    def ok_receipt_problem(self, receipt: Any, plan: Plan, phase: str) -> str | None:
        """Why `receipt` is not this participant's signed `phase` receipt with outcome ok, or None."""
        problem = self.evidence_problem(receipt, "receipt", plan, phase)
        if problem is None and isinstance(receipt, dict) and receipt.get("outcome") != "ok":
            problem = f"receipt outcome {receipt.get('outcome')} {receipt.get('code')}"
        return problem

    # -- the checks --------------------------------------------------------------------------------------------

    def advertisement(self) -> bool:
        rule, name = "HATP-MCP-1", "the server advertises HATP as a participant, with its operations and keys"
        expected = "extensions['ai.probita/human-gateway'] (or experimental['hatp']) revision 1, role participant"
        try:
            hatp = read_advertisement(self.s.client.server_capabilities, self.options.uri)
        except HatpError as exc:
            return self.check(rule, name, "initialize / server/discover", expected, exc.reason, False)
        problems: list[str] = []
        if "participant" not in (hatp.get("roles") or []):
            problems.append(f"roles {hatp.get('roles')!r} lack 'participant'")
        ops = hatp.get("operations")
        ops = ops if isinstance(ops, dict) else {}
        problems += self.s.learn_keys(hatp.get("keys"))
        wanted = self.options.operation
        chosen = wanted if wanted is not None else next((n for n, o in ops.items() if o.get("tier") == "hold"), None)
        chosen = chosen if chosen is not None else next(iter(ops), None)
        if chosen is None or chosen not in ops or not isinstance(ops[chosen], dict):
            problems.append(f"operation {wanted!r} not advertised" if wanted else "no operations advertised")
        else:
            self.operation, self.tier = chosen, str(ops[chosen].get("tier"))
            if self.tier not in ("hold", "compensate", "final"):
                problems.append(f"operation {chosen} has tier {self.tier!r}")
        got = "; ".join(problems) or f"roles {hatp.get('roles')}, operation {self.operation} ({self.tier})"
        return self.check(rule, name, "initialize / server/discover", expected, got, not problems)

    async def refused(
        self, rule: str, name: str, method: str, params: dict[str, Any], sent: str, code: str, plan: Plan, left: str
    ) -> None:
        """A planted violation: refused with JSON-RPC `code` (its number), and the branch left in state `left`."""
        got = await self.send(method, params)
        after = await self.state(plan)
        if code.startswith("HATP-OBJ"):  # a schema refusal: -32602, the rule in data (HATP-MCP-2)
            number = INVALID_PARAMS
            ok = got.code == number and got.error_data.get("rule") == code
        else:  # a HATP refusal: its stable number and machine name (HATP-MCP-3)
            number = CODES[code]
            ok = got.code == number and got.error_data.get("code") == code
        expected = f"error {number} ({code}), branch still {left}"
        self.check(rule, name, sent, expected, f"{got.describe()}; branch {after}", ok and after == left)

    async def run(self) -> None:
        if not self.advertisement():
            self.skip("HATP-PART-1", "every other check", "the server does not advertise HATP as a participant")
            return
        await self.planted_on_prepare()
        await self.quote_flow()
        plan = self.plan()
        prepared = await self.prepare_flow(plan)
        if prepared is None:
            self.skip("HATP-PART-6", "commit checks", "no yes vote to commit on")
        else:
            await self.renew_flow(plan)
            await self.planted_on_commit(plan, prepared)
            committed = await self.commit_flow(plan, prepared)
            if committed is not None:
                await self.compensate_flow(plan, committed)
        await self.abort_flow()
        await self.not_prepared()

    async def planted_on_prepare(self) -> None:
        plan = self.plan()
        params = self.prepare_params(plan)
        await self.refused(
            "HATP-OBJ-3",
            "a prepare with a member the protocol does not define is refused as invalid params",
            "hatp/txn/prepare",
            self.sign("prepare", {**params, "conformanceUnknown": 1}),
            "a signed prepare with an extra member conformanceUnknown",
            "HATP-OBJ-3",
            plan,
            "unknown",
        )
        await self.refused(
            "HATP-TRUST-1",
            "a prepare without the coordinator's auth is refused and holds nothing",
            "hatp/txn/prepare",
            params,
            "a well-formed prepare with no auth",
            "COORDINATOR_UNPROVEN",
            plan,
            "unknown",
        )
        await self.refused(
            "HATP-TRUST-2",
            "a prepare signed by a coordinator key the server does not trust is refused",
            "hatp/txn/prepare",
            self.sign("prepare", params, key=SigningKey.generate(["coordinator"])),
            f"a prepare whose auth names {self.identity.coordinator} but is signed by another key",
            "COORDINATOR_UNPROVEN",
            plan,
            "unknown",
        )
        await self.refused(
            "HATP-TRUST-3",
            "a quote's auth replayed on a prepare is refused",
            "hatp/txn/prepare",
            {**params, "auth": self.sign("quote", params)["auth"]},
            "a prepare carrying the auth signed for hatp/txn/quote",
            "AUTH_MISMATCH",
            plan,
            "unknown",
        )
        await self.refused(
            "HATP-TRUST-4",
            "a prepare whose auth expired is refused",
            "hatp/txn/prepare",
            self.sign("prepare", params, at=self.now() - timedelta(minutes=10)),
            "a prepare whose auth was issued 10 minutes ago (lifetime 5 minutes)",
            "AUTH_EXPIRED",
            plan,
            "unknown",
        )
        # HATP-TRUST-8: none of those left an answer behind; the proven prepare of the same txn decides afresh
        got = await self.send("hatp/txn/prepare", self.sign("prepare", params))
        vote = (got.result or {}).get("vote") or {}
        self.check(
            "HATP-TRUST-8",
            "after the refused prepares, the same prepare with a valid auth gets a fresh answer",
            "the same prepare, now signed by the trusted runner",
            "a yes vote (its signature is HATP-PART-1's check), not a refusal or a kept answer",
            got.describe(),
            vote.get("decision") == "yes",
        )
        if vote.get("decision") == "yes":
            await self.send("hatp/txn/abort", self.sign("abort", self.abort_params(plan)))
        wrong = self.plan()
        params = self.prepare_params(wrong, planDigest="sha256:" + "0" * 64)
        got = await self.send("hatp/txn/prepare", self.sign("prepare", params))
        vote = (got.result or {}).get("vote")
        problem = self.s.signature_problem(vote, "participant", "$.vote") if isinstance(vote, dict) else None
        voted_no = isinstance(vote, dict) and vote.get("decision") == "no" and vote.get("code") == "PLAN_MISMATCH"
        refused = got.code == CODES["PLAN_MISMATCH"]
        self.check(
            "HATP-PART-2",
            "a prepare whose planDigest is not the plan's is not a yes",
            "a signed prepare whose planDigest is sha256:000...0",
            "a signed no vote (PLAN_MISMATCH), or the refusal PLAN_MISMATCH",
            got.describe() + (f"; {problem}" if problem else ""),
            (voted_no and problem is None) or refused,
        )

    async def prepare_flow(self, plan: Plan) -> dict[str, Any] | None:
        params = self.sign("prepare", self.prepare_params(plan))
        got = await self.send("hatp/txn/prepare", params)
        result = got.result or {}
        problem = self.evidence_problem(result.get("vote"), "vote", plan) or self.evidence_problem(
            result.get("receipt"), "receipt", plan, "prepare"
        )
        vote, receipt = result.get("vote") or {}, result.get("receipt") or {}
        if problem is None and (vote.get("decision"), receipt.get("outcome")) != ("yes", "ok"):
            problem = f"vote {vote.get('decision')} {vote.get('code')}, receipt {receipt.get('outcome')}"
        sent_head = params.get("recordHead")
        self.check(
            "HATP-REC-19",
            "the vote and the receipt of a prepare sign the record head the prepare named",
            f"a signed prepare naming recordHead {sent_head}",
            f"vote.recordHead and receipt.recordHead both {sent_head}",
            f"vote {vote.get('recordHead')}, receipt {receipt.get('recordHead')}",
            vote.get("recordHead") == sent_head == receipt.get("recordHead"),
        )
        self.check(
            "HATP-PART-1",
            "a prepare is answered with a yes vote and an ok receipt, signed by an advertised key over the plan digest",
            f"a signed prepare of {self.operation} ({self.tier})",
            "vote yes and receipt ok, each signed by an advertised participant key, naming txnId, b1, planDigest",
            got.describe() + (f"; {problem}" if problem else ""),
            problem is None,
        )
        if problem is not None:
            return None
        again = await self.send("hatp/txn/prepare", self.sign("prepare", self.prepare_params(plan)))
        self.check(
            "HATP-PART-6",
            "a repeated prepare returns the first answer",
            "the same prepare again (a fresh auth)",
            "the same signed vote and receipt, byte for byte",
            "the same answer" if again.result == result else f"another answer: {again.describe()}",
            again.result == result,
        )
        return result

    async def planted_on_commit(self, plan: Plan, prepared: dict[str, Any]) -> None:
        params = self.commit_params(plan, prepared)
        await self.refused(
            "HATP-TRUST-1",
            "a commit without the coordinator's auth is refused and makes no effect",
            "hatp/txn/commit",
            params,
            "a commit with the decision and vote digest but no auth",
            "COORDINATOR_UNPROVEN",
            plan,
            "prepared",
        )
        await self.refused(
            "HATP-TRUST-3",
            "an abort's auth replayed on a commit is refused",
            "hatp/txn/commit",
            {**params, "auth": self.sign("abort", self.abort_params(plan))["auth"]},
            "a commit carrying the auth signed for hatp/txn/abort of the same branch",
            "AUTH_MISMATCH",
            plan,
            "prepared",
        )
        other = self.plan().model_copy(update={"txn_id": plan.txn_id})
        moved = self.commit_params(other, prepared)  # its decision names the other plan too
        await self.refused(
            "HATP-TRUST-5",
            "a commit naming another plan digest than the prepared one is refused",
            "hatp/txn/commit",
            self.sign("commit", moved),
            "a signed commit of the same txnId naming another plan's digest",
            "TXN_BOUND",
            plan,
            "prepared",
        )
        stale = {**prepared["vote"], "issuedAt": "2000-01-01T00:00:00Z"}
        await self.refused(
            "HATP-TRUST-7",
            "a commit resting on a vote the participant did not give is refused",
            "hatp/txn/commit",
            self.sign("commit", {**params, "voteDigest": digest(stale)}),
            "a signed commit whose voteDigest is another vote's",
            "VOTE_MISMATCH",
            plan,
            "prepared",
        )
        at_begin = {**self.decision(plan), "seq": 0}
        del at_begin["prev"]
        await self.refused(
            "HATP-REC-23",
            "a commit whose decision comes before the head its vote answered at is refused",
            "hatp/txn/commit",
            self.sign("commit", {**params, "decision": sign_object(at_begin, self.identity.key)}),
            "a signed commit whose (signed) decision event is at seq 0, the head the vote answered at",
            "HEAD_REORDERED",
            plan,
            "prepared",
        )

    async def commit_flow(self, plan: Plan, prepared: dict[str, Any]) -> dict[str, Any] | None:
        """The commit and its repeat; the ok commit receipt, or None."""
        got = await self.send("hatp/txn/commit", self.sign("commit", self.commit_params(plan, prepared)))
        receipt = (got.result or {}).get("receipt")
        decision = self.decision(plan)
        want = {"seq": decision["seq"], "digest": digest(decision)}
        signed = receipt.get("recordHead") if isinstance(receipt, dict) else None
        self.check(
            "HATP-REC-19",
            "a commit receipt signs the head of the decision event the commit carried",
            f"a signed commit carrying the decision event at seq {decision['seq']}",
            f"receipt.recordHead {want} (the decision's seq and the digest of the event as sent)",
            f"receipt.recordHead {signed}",
            signed == want,
        )
        problem = self.ok_receipt_problem(receipt, plan, "commit")
        after = await self.state(plan)
        self.check(
            "HATP-PART-1",
            "a proven commit after prepare is answered with a signed ok commit receipt",
            "a signed commit with the decision and the yes vote's digest",
            "receipt phase commit outcome ok, signed by an advertised key; branch committed",
            got.describe() + (f"; {problem}" if problem else "") + f"; branch {after}",
            problem is None and after == "committed",
        )
        if problem is not None or not isinstance(receipt, dict):
            return None
        again = await self.send("hatp/txn/commit", self.sign("commit", self.commit_params(plan, prepared)))
        self.check(
            "HATP-PART-10",
            "a repeated commit returns the first answer: the effect is not made again",
            "the same commit again (a fresh auth)",
            "the first commit receipt, byte for byte",
            "the same receipt" if again.result == got.result else f"another answer: {again.describe()}",
            again.result == got.result,
        )
        return receipt

    async def quote_flow(self) -> None:
        """A quote is answered like a prepare, with a signed vote and receipt (HATP-PART-1), whose receipt (phase
        quote) states validUntil, and it places nothing: the branch is not prepared afterwards (HATP-MODE-3)."""
        plan = self.plan()
        got = await self.send("hatp/txn/quote", self.sign("quote", self.prepare_params(plan, quoteOnly=True)))
        result = got.result or {}
        problem = self.evidence_problem(result.get("vote"), "vote", plan) or self.evidence_problem(
            result.get("receipt"), "receipt", plan, "quote"
        )
        self.check(
            "HATP-PART-1",
            "a quote is answered with a vote and a quote receipt, signed by an advertised key over the plan digest",
            f"a signed hatp/txn/quote of {self.operation} ({self.tier})",
            "vote and receipt (phase quote), each signed by an advertised participant key, naming txnId, b1, "
            "planDigest",
            got.describe() + (f"; {problem}" if problem else ""),
            problem is None,
        )
        receipt = result.get("receipt") or {}
        after = await self.state(plan)
        stated = isinstance(receipt, dict) and isinstance(receipt.get("validUntil"), str)
        self.check(
            "HATP-MODE-3",
            "a quote states how long it is good for (validUntil) and places nothing",
            f"a signed hatp/txn/quote of {self.operation} ({self.tier})",
            "a receipt stating validUntil; branch not prepared",
            f"validUntil {receipt.get('validUntil') if isinstance(receipt, dict) else None!r}; branch {after}",
            stated and after != "prepared",
        )

    def renew_params(self, plan: Plan, seconds: int) -> dict[str, Any]:
        return RenewRequest(txn_id=plan.txn_id, branch_id="b1", plan_digest=plan.digest(), lease_seconds=seconds).wire()

    async def renew_flow(self, plan: Plan) -> None:
        """HATP-PART-4: a hold's renewal is a signed renew receipt whose lease never passes the hold's horizon."""
        if self.tier != "hold":  # it holds nothing: a renewal must not grant a lease
            got = await self.send("hatp/txn/renew", self.sign("renew", self.renew_params(plan, 60)))
            receipt = (got.result or {}).get("receipt")
            problem = self.evidence_problem(receipt, "receipt", plan, "renew") if receipt else None
            refused = got.code is not None or (
                isinstance(receipt, dict) and problem is None and receipt.get("outcome") == "refused"
            )
            after = await self.state(plan)
            self.check(
                "HATP-PART-4",
                f"a renewal of a prepared {self.tier} branch, which holds nothing, grants no lease",
                f"a signed hatp/txn/renew of the prepared {self.tier} branch",
                "an error, or a signed renew receipt refused; branch still prepared",
                got.describe() + (f"; {problem}" if problem else "") + f"; branch {after}",
                refused and after == "prepared",
            )
            return
        got = await self.send("hatp/txn/renew", self.sign("renew", self.renew_params(plan, 10 * 365 * 24 * 3600)))
        receipt = (got.result or {}).get("receipt")
        problem = self.ok_receipt_problem(receipt, plan, "renew")
        if problem is None and isinstance(receipt, dict):
            lease, horizon = receipt.get("leaseExpiresAt"), receipt.get("holdHorizon")
            if not (isinstance(lease, str) and isinstance(horizon, str)):
                problem = f"the receipt states leaseExpiresAt {lease!r} and holdHorizon {horizon!r}"
            elif parse_ts(lease) > parse_ts(horizon):
                problem = f"the lease runs to {lease}, past the hold's horizon {horizon}"
        after = await self.state(plan)
        self.check(
            "HATP-PART-4",
            "a renewal asking for ten years is capped at the hold's horizon, in a signed renew receipt",
            "a signed hatp/txn/renew of the prepared hold with leaseSeconds of ten years",
            "receipt phase renew outcome ok, leaseExpiresAt at or before holdHorizon; branch still prepared",
            got.describe() + (f"; {problem}" if problem else "") + f"; branch {after}",
            problem is None and after == "prepared",
        )

    def compensate_params(self, plan: Plan, token: str | None) -> dict[str, Any]:
        return CompensateRequest(txn_id=plan.txn_id, branch_id="b1", plan_digest=plan.digest(), undo_token=token).wire()

    async def compensate_flow(self, plan: Plan, committed: dict[str, Any]) -> None:
        """HATP-PART-7: only a committed compensate-tier branch is compensated (and a repeat answers the same);
        compensating a hold or final branch is refused IRREVERSIBLE."""
        token = committed.get("undoToken")
        params = self.sign("compensate", self.compensate_params(plan, token if isinstance(token, str) else None))
        got = await self.send("hatp/txn/compensate", params)
        after = await self.state(plan)
        if self.tier != "compensate":
            receipt = (got.result or {}).get("receipt")
            problem = self.evidence_problem(receipt, "receipt", plan, "compensate") if receipt else None
            signed_refusal = (
                isinstance(receipt, dict)
                and problem is None
                and (receipt.get("outcome"), receipt.get("code")) == ("refused", "IRREVERSIBLE")
            )
            self.check(
                "HATP-PART-7",
                f"compensating a committed {self.tier} branch is refused and undoes nothing",
                f"a signed hatp/txn/compensate of the committed {self.tier} branch",
                f"error {CODES['IRREVERSIBLE']} (IRREVERSIBLE) or a signed compensate receipt refused IRREVERSIBLE; "
                "branch still committed",
                got.describe() + (f"; {problem}" if problem else "") + f"; branch {after}",
                (got.code == CODES["IRREVERSIBLE"] or signed_refusal) and after == "committed",
            )
            return
        receipt = (got.result or {}).get("receipt")
        problem = self.ok_receipt_problem(receipt, plan, "compensate")
        self.check(
            "HATP-PART-7",
            "a committed compensate-tier branch is compensated with its undo token, in a signed receipt",
            "a signed hatp/txn/compensate with the commit receipt's undoToken",
            "receipt phase compensate outcome ok, signed by an advertised key; branch compensated",
            got.describe() + (f"; {problem}" if problem else "") + f"; branch {after}",
            problem is None and after == "compensated",
        )
        again = await self.send("hatp/txn/compensate", self.sign("compensate", self.compensate_params(plan, token)))
        self.check(
            "HATP-PART-6",
            "a repeated compensate returns the first answer: the undo is not made again",
            "the same compensate again (a fresh auth)",
            "the first compensate receipt, byte for byte",
            "the same receipt" if again.result == got.result else f"another answer: {again.describe()}",
            again.result == got.result,
        )

    async def abort_flow(self) -> None:
        plan = self.plan()
        first = await self.send("hatp/txn/prepare", self.sign("prepare", self.prepare_params(plan)))
        if ((first.result or {}).get("vote") or {}).get("decision") != "yes":
            self.skip("HATP-PART-6", "abort after prepare", f"the prepare was not a yes: {first.describe()}")
            return
        got = await self.send("hatp/txn/abort", self.sign("abort", self.abort_params(plan)))
        receipt = (got.result or {}).get("receipt")
        problem = self.ok_receipt_problem(receipt, plan, "abort")
        after = await self.state(plan)
        self.check(
            "HATP-PART-1",
            "a proven abort after prepare is answered with a signed ok abort receipt",
            "a signed abort of a prepared branch",
            "receipt phase abort outcome ok, signed by an advertised key; branch aborted",
            got.describe() + (f"; {problem}" if problem else "") + f"; branch {after}",
            problem is None and after == "aborted",
        )
        again = await self.send("hatp/txn/prepare", self.sign("prepare", self.prepare_params(plan)))
        after = await self.state(plan)
        self.check(
            "HATP-PART-6",
            "a prepare repeated after the abort places nothing again",
            "the same prepare again, after the abort",
            "any answer (the first prepare's, or a no vote); branch still aborted",
            f"{again.describe()}; branch {after}",
            again.lost is None and after == "aborted",
        )
        early = self.plan()  # an abort that overtook its prepare (presumed abort), then the prepare
        aborted = await self.send("hatp/txn/abort", self.sign("abort", self.abort_params(early)))
        late = await self.send("hatp/txn/prepare", self.sign("prepare", self.prepare_params(early)))
        vote = (late.result or {}).get("vote") or {}
        problem = self.evidence_problem(vote, "vote", early) if vote else "no vote"
        after = await self.state(early)
        self.check(
            "HATP-PART-6",
            "a prepare after an abort of the branch votes no",
            "a signed abort of a branch never prepared, then its signed prepare",
            "abort answered; then a signed no vote; branch not prepared",
            f"abort: {aborted.describe()}; prepare: {late.describe()}"
            + (f"; {problem}" if problem else "")
            + f"; branch {after}",
            aborted.result is not None and vote.get("decision") == "no" and problem is None and after != "prepared",
        )

    async def not_prepared(self) -> None:
        plan = self.plan()
        prepared = {"vote": {"never": "given"}}
        params = self.sign("commit", self.commit_params(plan, prepared))
        got = await self.send("hatp/txn/commit", params)
        after = await self.state(plan)
        receipt = (got.result or {}).get("receipt") or {}
        refused = got.result is None and got.code is not None and got.lost is None
        refused = refused or receipt.get("outcome") == "refused"
        self.check(
            "HATP-PART-6",
            "a commit of a branch that was never prepared is refused and makes no effect",
            "a signed commit of a txn the server never saw",
            "a refusal (NOT_PREPARED, or VOTE_MISMATCH: no vote was given), branch not committed",
            f"{got.describe()}; branch {after}",
            refused and after not in ("committed", "committing"),
        )


async def run_participant_checks(
    client: Client, identity: Identity, options: ParticipantOptions, report: Report, now: Clock
) -> None:
    """Run every participant check on `client`, adding one result per check to `report`."""
    await _Run(Session(client, identity, report, now, options.timeout), options).run()
