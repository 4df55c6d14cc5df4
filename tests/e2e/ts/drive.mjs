// The suite driven from the official TypeScript MCP SDK, a client nobody here wrote (tests/e2e/test_typescript_client.py).
//
// node drive.mjs CONFIG_JSON
//   CONFIG_JSON: {"transport": "http"|"stdio", "coordinator": SERVER, "gateway": SERVER, "txnId": ID,
//                 "humanKeys": DIR, "progressCheck": bool}
//   SERVER: {"url": "http://127.0.0.1:PORT/mcp", "token"?: BEARER} or an mcpServers entry {"command", "args", "env", "cwd"}
//
// What an agent and its person do, with nothing from this repository but the servers: initialize, list tools, read
// the example plan, begin a plan with a stale deadline and read the refusal's reason in the tool result, begin a
// fresh plan, wait (with progress), approve through the gateway's tools with the person's own Ed25519 signature
// over the RFC 8785 form of the decision (written here, independently), and wait for COMMITTED. Prints one JSON
// line of what it saw; exits 1 with a message on anything unexpected.

import { createPrivateKey, randomBytes, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const config = JSON.parse(process.argv[2]);
const seen = { transport: config.transport };

function fail(message) {
  console.error(`drive.mjs: ${message}`);
  process.exit(1);
}

function transportFor(server) {
  if (server.url) {
    // a server that serves known callers only (the coordinator over HTTP, HATP-MCP-52): the caller's bearer token
    const headers = server.token ? { Authorization: `Bearer ${server.token}` } : undefined;
    return new StreamableHTTPClientTransport(new URL(server.url), headers ? { requestInit: { headers } } : undefined);
  }
  return new StdioClientTransport({
    command: server.command,
    args: server.args,
    env: { ...process.env, ...(server.env ?? {}) },
    cwd: server.cwd,
    stderr: "inherit",
  });
}

async function connect(name, server) {
  const client = new Client({ name: `hatp-e2e-${name}`, version: "1.0.0" });
  await client.connect(transportFor(server));
  return client;
}

function text(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

async function tool(client, name, args, options) {
  const result = await client.callTool({ name, arguments: args }, undefined, options);
  if (result.isError) fail(`${name} refused: ${text(result)}`);
  return result.structuredContent ?? JSON.parse(text(result));
}

// RFC 8785 (JCS): what the person signs. Strings and numbers as ECMAScript's JSON.stringify writes them, members
// sorted by UTF-16 code units, no whitespace; absent members are left out, never written as null.
function canonical(value) {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) fail("a number that JSON cannot hold");
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
}

function signedDecision(jwk, askId, subjectDigest, human, terms) {
  const proof = {
    type: "hatp.human-decision",
    askId,
    subjectDigest,
    human,
    decision: "approve",
    issuedAt: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
    nonce: randomBytes(18).toString("base64url"),
    terms,
  };
  const key = createPrivateKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d }, format: "jwk" });
  const sig = sign(null, Buffer.from(canonical(proof), "utf8"), key).toString("base64url");
  return { ...proof, signature: { alg: "EdDSA", kid: jwk.kid, sig } };
}

async function main() {
  const coordinator = await connect("agent", config.coordinator);
  const caps = coordinator.getServerCapabilities() ?? {};
  seen.hatpRoles = caps.experimental?.hatp?.hatp?.roles ?? null;
  const tools = (await coordinator.listTools()).tools;
  seen.tools = tools.map((t) => t.name).sort();
  const begin = tools.find((t) => t.name === "begin_transaction");
  seen.planSchemaMembers = Object.keys(begin?.inputSchema?.properties?.plan?.properties ?? {}).length;

  const example = await coordinator.readResource({ uri: "hatp://examples/trip-plan" });
  const plan = JSON.parse(example.contents[0].text);
  plan.txnId = config.txnId;

  // A plan whose deadline has passed: the refusal is a tool result the model reads, naming rule, path and fix.
  const stale = structuredClone(plan);
  stale.txnId = `${config.txnId}-stale`;
  stale.deadlines.decideBy = "2020-01-01T00:00:00Z";
  const refused = await coordinator.callTool({ name: "begin_transaction", arguments: { plan: stale } });
  seen.refusedIsError = refused.isError === true;
  seen.refusalText = text(refused);

  const begun = await tool(coordinator, "begin_transaction", { plan });
  seen.begunState = begun.state;

  // Wait until the gateway has asked the finance approver (its pending vote is recorded).
  let status = begun;
  for (let i = 0; i < 20 && !status.votes.some((v) => v.branchId === "finance"); i++) {
    status = await tool(coordinator, "transaction_status", {
      txn_id: plan.txnId,
      wait_seconds: 20,
      after_events: status.eventCount,
    });
  }
  if (!status.votes.some((v) => v.branchId === "finance")) fail(`the approver was never asked: ${JSON.stringify(status)}`);

  if (config.progressCheck) {
    // A wait longer than this client's own timeout (15 s) survives because the server sends progress (every 10 s)
    // and the client resets its timeout on each one.
    let progress = 0;
    const waited = await tool(
      coordinator,
      "transaction_status",
      { txn_id: plan.txnId, wait_seconds: 21 },
      { timeout: 15000, resetTimeoutOnProgress: true, onprogress: () => progress++ },
    );
    seen.progressNotifications = progress;
    seen.stateAfterLongWait = waited.state;
  }

  const gateway = await connect("person", config.gateway);
  const askId = `${plan.txnId}/finance`;
  const shown = await tool(gateway, "show_ask", { ask_id: askId });
  const human = shown.waitingFor[0];
  const jwk = JSON.parse(readFileSync(join(config.humanKeys, `${human.split("/").pop()}.private.jwk.json`), "utf8"));
  const decided = await tool(gateway, "decide", {
    ask_id: askId,
    proof: signedDecision(jwk, askId, shown.subjectDigest, human, shown.terms),
  });
  seen.approvedBy = human;
  seen.askState = decided.state;

  for (let i = 0; i < 20 && !status.closed; i++) {
    status = await tool(coordinator, "transaction_status", { txn_id: plan.txnId, wait_seconds: 20 });
  }
  seen.outcome = status.outcome ?? null;
  seen.results = status.results ?? null;
  seen.recordDigest = status.recordDigest ?? null;
  seen.recordInStatus = "record" in status;
  const record = await coordinator.readResource({ uri: status.recordUri });
  seen.recordEvents = JSON.parse(record.contents[0].text).events.length;

  await gateway.close();
  await coordinator.close();
  console.log(JSON.stringify(seen));
}

main().catch((err) => fail(err?.stack ?? String(err)));
