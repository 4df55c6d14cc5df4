"""The MCP binding of HATP: hatp/* methods as custom JSON-RPC requests over the official MCP SDK.

Beside hatp_mcp.web in the layers: may import the runtime, the stores and the core; nothing below imports it.

The binding itself:

- errors.py: the one boundary between core refusals (HatpError) and JSON-RPC errors on the wire, both ways;
- extension.py: HATP advertised in a server's capabilities, and the advertisement read on the client side;
- hatp_methods.py: `add_method`, the one way every HATP server adds a hatp/* request to the SDK's Server;
- hatp_server.py: `HatpServer`, whose agent tools refuse arguments that do not fit with a HATP refusal;
- call.py: one hatp/* request sent over a client session, its answer a validated wire object or a HatpError;
- wire_guard.py: the wire's own limits (HATP-OBJ-1/2) checked on every message before the SDK parses it;
- pins.py: which keys a coordinator trusts for each participant: pinned by the operator, or on first use.

The servers and their clients:

- participant_server.py: `serve_hatp`, one call that makes an existing MCP server a HATP participant;
- participant_estimate.py: `hatp/txn/estimate` on a participant: the bounds it advertises for an operation;
- participant_client.py: `mcp_participant`, the Participant Protocol over a client session, evidence checked;
- coordinator_server.py: `serve_coordinator`, a coordinator as an MCP server for agents and MCP clients;
- agent_guide.py: what a coordinator tells an agent about writing a plan: schema, fresh example, prompt;
- gateway_server.py: `serve_gateway`, the Human Gateway as a voter over MCP;
- gateway_tools.py: the Human Gateway's ordinary MCP tools, for people (decide with a signed proof) and agents;
- gateway_questions.py: `serve_gateway_questions`, questions an agent asks people through the Human Gateway;
- gateway_client.py: `mcp_approver`, the coordinator's Approver over a client session, trusting nothing unsigned;
- directory_server.py: `serve_directory`, the Directory as an MCP server: resolving addresses, serving cards;
- gated_tools.py: approval gates on an existing MCPServer: a gated call runs only with an approval that fits it;
- journal_server.py: `serve_journal`, the journal as an MCP server for agents, and its undos over MCP;
- journal_proxy.py: the proxy: an upstream server's tools passed, journaled, irreversible, hidden or denied;
- proxy_elicit.py: the gate's inbox link as a URL-mode elicitation, for a client that declared it;
- proxy_gate.py: the proxy's gated tools and budgets: it asks the gateway as its agent, checks, then calls;
- proxy_gate_cli.py: the proxy's gate options (--org, --gateway, --agent-key, ...) and the gate they open;
- proxy_participant.py: the proxy's participant tools: each tier's callbacks as upstream calls;
- proxy_upstream.py: the proxy's policy file read, and its upstream started with exactly the env the file names;
- proxy_reload.py: the proxy's policy file taken again while it serves when it changes, or refused whole;
- http_callers.py: who sent a request over HTTP, for the journal and the coordinator: a bearer token per caller;
- journal_undo_approvals.py: approval-gated undos: the journal asks the Human Gateway to approve exactly that call;
- gateway_ask.py: the one ask-and-poll of the Human Gateway for one call's approval (the gate's and the undo's).

Processes and connections:

- bridge.py: a stdio-to-streamable-HTTP relay, what `hatp connect` runs for a client that starts a command;
- serve.py: one MCP server run as its own process over stdio or streamable HTTP, and stopped cleanly;
- stdio_pipes.py: the process's stdin and stdout as event-loop pipes, for the SDK's stdio server transport;
- launch.py: server processes started from a parent (tests, the demo, the bench), and made sure to end;
- server_links.py: a long-lived coordinator's connections to other MCP servers, each re-opened after it is lost.
"""

__all__: list[str] = []
