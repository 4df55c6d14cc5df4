"""The record head a participant signs (spec/hatp.md HATP-REC-19) and the one order it checks itself
(HATP-REC-23): a commit decided before the vote it rests on is refused."""

from __future__ import annotations

import pytest

from hatp_mcp.core.model.evidence import RecordHead
from hatp_mcp.core.participant.record_head import check_commit_head, head_of
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.errors import HatpError

EVENT = {"type": "hatp.event", "seq": 7, "event": "decision", "body": {"decision": "commit"}}


def test_HATP_REC_19_the_head_at_an_event_is_its_seq_and_the_digest_of_the_event_as_received() -> None:
    head = head_of(EVENT)
    assert head is not None and (head.seq, head.event_digest) == (7, digest(EVENT))
    assert head.wire() == {"seq": 7, "digest": digest(EVENT)}  # on the wire: {seq, digest}


@pytest.mark.parametrize(
    "event",
    [None, "decision", {"seq": "7"}, {"seq": True}, {"seq": -1}, {"seq": 1_000_001}, {"seq": 1, "x": 0.5}],
)
def test_HATP_REC_19_no_head_is_named_for_what_is_no_event_a_head_can_name(event: object) -> None:
    assert head_of(event) is None  # the answer then signs no head: "not anchored", never anchored somewhere


def test_HATP_REC_23_a_commit_decided_at_or_before_the_head_its_vote_answered_at_is_refused() -> None:
    vote = {"type": "hatp.vote", "decision": "yes", "recordHead": {"seq": 7, "digest": digest(EVENT)}}
    for seq in (7, 3):
        with pytest.raises(HatpError) as refused:
            check_commit_head(RecordHead(seq=seq, event_digest=digest(EVENT)), vote)
        assert (refused.value.rule, refused.value.code, refused.value.path) == (
            "HATP-REC-23",
            "HEAD_REORDERED",
            "$.decision.seq",
        )
        assert f"the commit decision is event {seq}, but this branch's yes vote answered at head 7" in (
            refused.value.reason
        )
    check_commit_head(RecordHead(seq=8, event_digest=digest(EVENT)), vote)  # after the vote: fine
    check_commit_head(None, vote)  # no decision carried (an in-process caller): nothing to compare
    check_commit_head(RecordHead(seq=0, event_digest=digest(EVENT)), {"decision": "yes"})  # a vote without a head
