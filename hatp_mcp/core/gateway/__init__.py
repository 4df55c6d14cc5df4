"""The human side: addresses, the Directory and its cards, the gateway's routing machine (quorum, separation of
duties, escalation), authority, human proofs, asks and the approval screen. Imports model and signing; never
gated_tools, txn or journal.

- address.py: HATP addresses, `human://` (who a request goes to) and `agent://` (who wrote it); parsing only;
- directory.py: the Directory: verified Human Cards of one organisation, an address resolved to ranked candidates;
- agents.py: who an agent acts for, proven: Directory-signed agent cards and the agent's signed requests;
- authority.py: what a plan moves per currency, and whether a requirement or a person's card covers it;
- machine.py: the gateway's state machine for one ask: routing, quorum, separation of duties, SLA escalation;
- ask_ids.py: ask ids in three namespaces no caller can cross: plan approvals, tool-call approvals, questions;
- asks.py: asks beyond approve (choose, form, text), routed like approvals; an answer that does not fit is refused;
- ask_evidence.py: what the gateway signs about an ask (routing record, vote, approval, answer), built unsigned;
- proof.py: human decision proofs: a person signs their own decision; nothing else makes it count;
- passkey.py: passkeys as the decision proof: the WebAuthn challenge of one decision, and its assertion checked;
- requirement.py: whether an approval's human decisions meet a requirement, checked by whoever relies on it;
- terms.py: approval terms: a pending ask's deadline shrunk and the holds' end times named (`hatp/txn/tighten`);
- estimate.py: the gateway's worst case for one approval requirement, by its own machine with nobody deciding;
- screen.py: the approval screen rendered from the plan's structure; agent-written text labelled as such;
- notice.py: what the gateway tells a person, and when: the notices a delivery channel carries.
"""
