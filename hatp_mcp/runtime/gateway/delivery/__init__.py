"""Delivery: telling people an ask waits for them, over their cards' channels (spec/gateway.md HATP-GW-60..66).

- settings.py: the organisation's gateway settings (`ORG/gateway.json`): inbox link, retry policy, channels, and
  secrets read from environment variables or 0600 files only;
- channels.py: one sender per contact kind, each its real wire format: email over SMTP, chat as a signed
  Slack-shaped webhook, sms as a signed webhook to the provider's URL;
- worker.py: the Deliverer, the gateway's durable delivery loop on the Clock: what each ask owes
  (core/gateway/notice.py), retries with backoff, the next channel, and the unreachable person handed on.

May import the core, the stores and runtime.clock / runtime.gateway; never the MCP binding.
"""
