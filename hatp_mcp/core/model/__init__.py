"""The typed wire objects of HATP (pydantic v2, camelCase on the wire, strict). Pure: no IO. Of the core, imports
signing only.

The package imports none of its modules: each user imports the ones it needs from their own module, so a command
builds only the models it uses (a model is built when its module is imported).

- base.py: the base of every wire model (camelCase, strict, unknown members refused) and the shared field types;
- wire_models.py: `WIRE_MODELS`, every top-level wire object by schema name, which spec/schemas/ is generated from;
- wire.py: untrusted bytes turned into wire objects, with one-line errors naming the source and the JSON path;
- amount.py: money as exact decimal strings with an ISO 4217 currency; never floats, never converted;
- currency.py: the ISO 4217 codes an amount may be in; any other code is refused before anyone is asked;
- money.py: what a plan moves, per currency: the one computation the validator, gateway and approvers share;
- plan.py: the Plan, one all-or-nothing transaction, and its Branches; all evidence names its digest;
- example_plan.py: the example plan, a trip in the acme.com test organisation, its times made from `now`;
- evidence.py: signed evidence: votes, receipts, routing records and approvals, each naming the plan digest;
- record.py: the Transaction Record, a hash chain of coordinator-signed events;
- messages.py: the request / result messages between a coordinator and a participant (hatp/txn/*, hatp/lock/*);
- txn_api.py: the wire objects an agent exchanges with a coordinator: begin, status, abort, the pending list;
- txn_auth.py: the coordinator's signed authorization of one state-changing request (`auth` in the params);
- estimate.py: the wire objects of `hatp/txn/estimate` and `hatp/txn/tighten`;
- terms.py: the terms a person approves under: the approval deadline and the holds' end times;
- card.py: Human Cards, who a person is to the protocol, signed by their Directory; no contact details;
- agent.py: the agent card naming the person an agent acts for, and the request the agent signs;
- gateway.py: the Human Gateway's models: the Ask, the signed Answer, the Screen, and its durable AskRecord;
- gateway_messages.py: the request / result messages of the Human Gateway and the Directory as MCP servers;
- question.py: a question an agent asks people over MCP (`hatp/ask/{choose,form,text}`);
- proxy_policy.py: the proxy's policy file: its upstream, that server's environment, a policy per tool;
- journal_wire.py: what the journal and the proxy answer: saga statuses, dead letters, shadow and policy status;
- toolcall.py: the subject of a tool-call approval: server, tool, arguments by digest, most paid and to whom;
- when.py: times as a person reads them, with a countdown where read at once (HATP-GW-88, 97).
"""
