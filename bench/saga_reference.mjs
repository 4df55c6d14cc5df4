// The reference side of bench.saga_reference: apology-protocol's own validatePlan, timed in rounds that the
// Python side asks for one at a time on stdin, so both sides run interleaved on the same core.
// Usage: node bench/saga_reference.mjs REFERENCE_DIR NOW_ISO  (then one line "N" per round: N passes over the plans)
// Reads the plans as JSON lines on stdin first, until an empty line. Prints one line per round: ns per plan.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [refDir, nowIso] = process.argv.slice(2);
const { validatePlan } = await import(pathToFileURL(join(refDir, "dist", "index.js")).href);
const now = new Date(nowIso);
const plans = [];
let reading = true;
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (reading) {
    if (line === "") {
      reading = false;
      // one line per plan: is it valid? (the Python side checks both sides agree)
      process.stdout.write(JSON.stringify(plans.map((p) => validatePlan(p, { now }).ok)) + "\n");
    } else {
      plans.push(JSON.parse(line));
    }
    continue;
  }
  const passes = Number(line);
  let sink = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < passes; i++) {
    for (const p of plans) sink += validatePlan(p, { now }).ok ? 1 : 0;
  }
  const ns = Number(process.hrtime.bigint() - start) / (passes * plans.length);
  process.stdout.write(`${ns} ${sink}\n`);
}
