// The official Resonate TypeScript SDK (generator API) driven against a troth server.
//
//   node sdk.mjs worker --url U --group G --pid P --ttl MS --markers FILE [--hang-step N]
//   node sdk.mjs invoke --url U --id ID --func NAME --target G --args JSON
//
// A worker registers every workflow below and serves its group until killed. `invoke`
// starts one workflow on a group through `rpc` (so it runs in a worker, not here),
// prints `RESULT <json>` and exits. Steps append lines to the markers file so a test can
// count how often each one really ran. With INTEROP_TRACE=<file> every request and
// response is appended to that file, which is how a server bug is shown to its owner.
import { appendFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Resonate } from "@resonatehq/sdk";

const { positionals, values: opt } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: "string" },
    group: { type: "string", default: "default" },
    pid: { type: "string" },
    ttl: { type: "string", default: "60000" },
    markers: { type: "string" },
    "hang-step": { type: "string", default: "0" },
    id: { type: "string" },
    func: { type: "string" },
    target: { type: "string" },
    args: { type: "string", default: "[]" },
  },
});

const PID = opt.pid ?? `ts-${process.pid}`;
const HANG_STEP = Number(opt["hang-step"]);
const LOG_LEVEL = process.env.INTEROP_LOG ?? "warn";
// The SDK reads RESONATE_TOKEN for its requests by itself, but hands its poll stream only a
// token given here, so a worker against a server with auth on must pass it explicitly.
const TOKEN = process.env.RESONATE_TOKEN || undefined;

function mark(line) {
  appendFileSync(opt.markers, `${line}\n`);
}

// --- leaf functions (run as ctx.run steps) -------------------------------------------

function step(_ctx, tag, i) {
  mark(`${tag} step ${i}`);
  return i * i;
}

function note(_ctx, line) {
  mark(line);
  return line;
}

function now(_ctx) {
  return Date.now();
}

// A step that, in the worker told to hang there, never returns: the test kills that
// worker while the step is in flight. Its "done" marker is written only on success.
async function recoverStep(_ctx, tag, i) {
  mark(`${tag} enter ${i} ${PID}`);
  if (i === HANG_STEP) await new Promise(() => {});
  mark(`${tag} done ${i}`);
  return i;
}

// --- workflows ------------------------------------------------------------------------

function* hello(_ctx, name) {
  return `hello ${name}`;
}

function* steps(ctx, tag, n) {
  const out = [];
  for (let i = 1; i <= n; i++) out.push(yield* ctx.run(step, tag, i));
  return out;
}

function* square(_ctx, i) {
  return i * i;
}

function* fanout(ctx, target, n) {
  const futures = [];
  for (let i = 1; i <= n; i++) {
    futures.push(yield* ctx.beginRpc("square", i, ctx.options({ target })));
  }
  const out = [];
  for (const f of futures) out.push(yield* f);
  return out;
}

function* callee(_ctx, x) {
  return { pid: PID, value: x + 1 };
}

function* caller(ctx, target, x) {
  const res = yield* ctx.rpc("callee", x, ctx.options({ target }));
  return { pid: PID, callee: res };
}

function* sleeper(ctx, ms) {
  const t0 = yield* ctx.run(now);
  yield* ctx.sleep(ms);
  const t1 = yield* ctx.run(now);
  return t1 - t0;
}

function* waiter(ctx, tag) {
  const p = yield* ctx.promise();
  yield* ctx.run(note, `${tag} promise ${p.id}`);
  const v = yield* p;
  return { got: v };
}

function* recover(ctx, tag, n) {
  const out = [];
  for (let i = 1; i <= n; i++) out.push(yield* ctx.run(recoverStep, tag, i));
  return out;
}

// --- cross-SDK calls (tests/interop/test_cross_rpc.py) ----------------------------------

function* echo(_ctx, ...args) {
  return args;
}

function* boom(_ctx, message) {
  const err = new Error(message);
  err.name = "BoomError";
  throw err;
}

function* aggregate(_ctx, message) {
  throw new AggregateError([new Error("first"), new RangeError("second")], message);
}

function* nothing(_ctx) {}

// `func(...args)` on group `target`, its value returned as this workflow's own.
function* relay(ctx, target, func, ...args) {
  return yield* ctx.rpc(func, ...args, ctx.options({ target }));
}

// `func(...args)` on group `target`, expected to fail: what the failure looked like here.
function* catcher(ctx, target, func, ...args) {
  try {
    const value = yield* ctx.rpc(func, ...args, ctx.options({ target }));
    return { isError: false, value };
  } catch (err) {
    const out = { isError: err instanceof Error, name: err?.name, message: err?.message };
    if (err instanceof AggregateError) out.errors = err.errors.map((e) => [e.name, e.message]);
    return out;
  }
}

const WORKFLOWS = {
  hello, steps, square, fanout, callee, caller, sleeper, waiter, recover,
  echo, boom, aggregate, nothing, relay, catcher,
};

// --- modes ----------------------------------------------------------------------------

async function worker() {
  const resonate = new Resonate({
    url: opt.url,
    group: opt.group,
    pid: PID,
    ttl: Number(opt.ttl),
    token: TOKEN,
    logLevel: LOG_LEVEL,
  });
  for (const [name, fn] of Object.entries(WORKFLOWS)) resonate.register(name, fn);
  await connected;
  console.log(`READY ${PID}`);
  // The SSE connection keeps the event loop alive; the test ends this process.
}

async function invoke() {
  const resonate = new Resonate({
    url: opt.url,
    group: `client-${process.pid}`,
    token: TOKEN,
    logLevel: LOG_LEVEL,
  });
  const args = JSON.parse(opt.args);
  try {
    const result = await resonate.rpc(opt.id, opt.func, ...args, resonate.options({ target: opt.target }));
    console.log(`RESULT ${JSON.stringify(result ?? null)}`);
    process.exit(0);
  } catch (err) {
    console.log(`ERROR ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}

// Resolves when the SDK's SSE stream (GET /poll/...) is answered with 200, so a worker
// says READY only once the server can deliver to it.
let pollConnected;
const connected = new Promise((resolve) => {
  pollConnected = resolve;
});

// Wraps the global fetch, which the SDK uses for both POST / and its EventSource. With a
// trace file, every envelope and every SSE frame received is appended to it.
function traceFetch(file) {
  const real = globalThis.fetch;
  const log = (line) => file && appendFileSync(file, `${line}\n`);
  globalThis.fetch = async (url, init) => {
    const res = await real(url, init);
    if (init?.method === "POST") {
      log(`>>> ${init.body}\n<<< ${res.status} ${await res.clone().text()}`);
      return res;
    }
    if (!String(url).includes("/poll/") || !res.ok || !res.body) return res;
    pollConnected();
    if (!file) return res;
    const [mine, theirs] = res.body.tee();
    (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of mine) log(`SSE ${decoder.decode(chunk).trimEnd()}`);
    })().catch(() => {});
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

traceFetch(process.env.INTEROP_TRACE);

const modes = { worker, invoke };
if (!modes[positionals[0]]) {
  console.error(`usage: sdk.mjs worker|invoke ... (got ${positionals[0]})`);
  process.exit(2);
}
await modes[positionals[0]]();
