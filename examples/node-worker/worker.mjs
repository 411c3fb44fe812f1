// A Jobgate worker in Node.js, written from docs/protocol.md alone: it verifies each push with
// the official Standard Webhooks library, runs the task, and answers
//
//   - inline (200 and the result as the JSON body) for a short task: `add`;
//   - with 202, then callbacks (a heartbeat, then the result) for a long one: `slow`;
//   - 500 (retried) or 422 (not retried) for a task that throws, marked with the header
//     `jobgate-task-failure: 1` as the task's own failure: it does not count against the
//     endpoint's circuit breaker;
//   - 401 for a push whose signature does not verify, 404 for a task it does not know,
//     400 for a batch (register it with batch_size 1, the default).
//
// Durable steps and sleep (docs/protocol.md, "Durable steps and sleep"): `ctx.step(name, fn)`
// returns the result an earlier attempt recorded (the push's `steps`) without running `fn`, or
// runs it and records its result with the `step` callback before going on; `ctx.sleep(name,
// ms)` records the wake time as a step, then ends the attempt: 202 and the `sleep` callback.
// `checkout` uses both. Waiting for an event (docs/protocol.md, "Waiting for an event"):
// `ctx.waitForEvent(step, { event, match, timeout })` returns the step's recorded result (the
// event, or null at the timeout), or ends the attempt: 202 and the `wait` callback. `approve`
// uses it. Invoking a child task (docs/protocol.md, "Invoking a child task"):
// `ctx.invoke(step, { name, payload, queue, timeout })` returns the child's result once the
// step records its end (throwing `ChildFailed` for any other end), or ends the attempt: 202 and
// the `invoke` callback. `order` invokes `add`. A durable HTTP call (docs/protocol.md, "A durable HTTP call"): `ctx.call(step, url,
// { method, json, timeout })` returns the recorded answer ({status, headers, body}), throws on a
// recorded failure ({error, kind}), or ends the attempt: 202 and the `call` callback (the gateway
// makes the request and records the step). `quote` uses it.
//
// Run: JOBGATE_WORKER_SECRET=whsec_... PORT=8002 node worker.mjs
import { appendFileSync } from "node:fs";
import http from "node:http";
import { Webhook } from "standardwebhooks";

const secret = process.env.JOBGATE_WORKER_SECRET;
if (!secret) {
  console.error("set JOBGATE_WORKER_SECRET to the endpoint's signing secret (whsec_...)");
  process.exit(2);
}
const webhook = new Webhook(secret);
const port = Number(process.env.PORT ?? 8002);
const host = process.env.HOST ?? "127.0.0.1";
const MAX_BODY = 4 * 1024 * 1024;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A task's failure the gateway must not retry (answered 422 inline, or `retryable: false`).
class Fail extends Error {}

// Thrown by ctx.sleep: the attempt ends, and the gateway pushes the task again at `until`.
class Sleep extends Error {
  constructor(until) {
    super(`sleeping until ${until}`);
    this.until = until;
  }
}

// Thrown by ctx.waitForEvent: the attempt ends until the event or the timeout (the gateway
// records the step, then pushes the task again).
class WaitForEvent extends Error {
  constructor(body) {
    super(`waiting (${body.step}) for event ${body.event}`);
    this.body = body;
  }
}

// Thrown by ctx.invoke: the attempt ends until the child ends or the timeout (the gateway
// enqueues the child, records the step with its end, then pushes the task again).
class Invoke extends Error {
  constructor(body) {
    super(`invoking (${body.step}) ${body.name}`);
    this.body = body;
  }
}

// Thrown by ctx.call: the attempt ends while the gateway makes the HTTP call.
class CallOut extends Error {
  constructor(body) {
    super(`waiting (${body.step}) for ${body.method} ${body.url}`);
    this.body = body;
  }
}

// A child that ended other than succeeded: its state (failed, dead, cancelled, timed_out or
// refused), id and error, as the invoke's step recorded them. A Fail: a retry would replay the
// same recorded end.
class ChildFailed extends Fail {
  constructor({ state, id, error }) {
    super(`child ${id} ${state}: ${error}`);
    Object.assign(this, { state, childId: id });
  }
}

// The task functions: a push's `payload` in, a JSON result out.
const tasks = {
  // Short: answered inline.
  add: { inline: true, run: async ({ a, b }) => {
    if (typeof a !== "number" || typeof b !== "number") throw new Fail("a and b must be numbers");
    return { sum: a + b };
  } },
  // Long: answered 202 at once, then heartbeats keep the lease alive while it works.
  slow: { inline: false, run: async ({ steps = 3, ms = 200, value = null }, ctx) => {
    for (let step = 1; step <= steps; step++) {
      await sleep(ms);
      const { cancel_requested } = await ctx.heartbeat(step / steps);
      if (cancel_requested) throw new Fail("cancelled");
    }
    return { value, steps };
  } },
  // Waits for `doc.approved` of its doc; pushed again with the event, or null at the timeout.
  approve: { inline: true, run: async ({ doc, timeout = 600 }, ctx) => {
    const approval = await ctx.waitForEvent("approval", { event: "doc.approved", match: { doc }, timeout });
    return { approval };
  } },
  // Invokes the child `add` with `a` and `b` and returns its sum; pushed again with the
  // child's end once it ends.
  order: { inline: true, run: async ({ a, b, timeout = 600 }, ctx) => {
    const { sum } = await ctx.invoke("total", { name: "add", payload: { a, b }, timeout });
    return { total: sum };
  } },
  // Has the gateway fetch `url` (the worker stops meanwhile); pushed again with the answer.
  quote: { inline: true, run: async ({ url, timeout = 60 }, ctx) => {
    const { status, body } = await ctx.call("quote", url, { method: "POST", json: { item: 1 }, timeout });
    return { status, body };
  } },
  // Durable: charge once per task (the step's side effect is a line in `ledger`), sleep
  // `sleep_ms`, then ship; shipping fails on attempt 1, and attempt 2 replays the charge.
  checkout: { inline: true, run: async ({ ledger, sleep_ms = 0 }, ctx) => {
    const charge = await ctx.step("charge", () => {
      appendFileSync(ledger, "charge\n");
      return { payment: `pay_${ctx.id}`, attempt: ctx.attempt };
    });
    if (sleep_ms > 0) await ctx.sleep("settle", sleep_ms);
    if (ctx.attempt === 1) throw new Error("the carrier timed out");  // retried
    const shipment = await ctx.step("ship", () => ({ tracking: `TRK-${ctx.id}`, attempt: ctx.attempt }));
    return { charge, shipment };
  } },
};

function answer(res, status, body, type = "application/json", headers = {}) {
  const text = body === undefined ? "" : JSON.stringify(body);
  const length = Buffer.byteLength(text);
  res.writeHead(status, { ...headers, "content-type": type, "content-length": length });
  res.end(text);
}

// Marks an error answer as the task's own failure (docs/protocol.md, "The task's own failure").
const TASK_FAILURE = { "jobgate-task-failure": "1" };

function problem(res, status, title, detail) {
  answer(res, status, { title, status, detail }, "application/problem+json");
}

// One callback: POST <jobgate-callback>/<kind> with the lease token in `jobgate-lease`.
async function callback(base, lease, kind, body) {
  const response = await fetch(`${base}/${kind}`, {
    method: "POST",
    headers: { "content-type": "application/json", "jobgate-lease": lease },
    body: JSON.stringify(body ?? {}),
  });
  if (response.status === 409 || response.status === 404) {
    // The lease is stale (the task was dispatched again) or the task is gone: stop quietly.
    throw Object.assign(new Error(`${kind}: lease lost (${response.status})`), { lost: true });
  }
  if (!response.ok) throw new Error(`${kind} callback answered ${response.status}`);
  return response.json();
}

// The final callback is retried a few times on network errors and 5xx answers.
async function finish(base, lease, kind, body) {
  for (const pause of [0, 500, 1000, 2000, 4000]) {
    await sleep(pause);
    try {
      return await callback(base, lease, kind, body);
    } catch (e) {
      if (e.lost) return null;
      console.error(`${kind} callback failed: ${e.message}`);
    }
  }
  return null;
}

function errorBody(e) {
  if (e instanceof Fail) return { error: e.message, retryable: false };
  return { error: String(e?.message ?? e), traceback: e?.stack ?? null, retryable: true };
}

// What a task function gets besides its payload: its attempt, heartbeats, steps and sleep.
function context(push, base, lease) {
  // The steps earlier attempts recorded: name → result (absent from the push: none).
  const recorded = new Map((push.steps ?? []).map((step) => [step.name, step.result]));
  const used = new Set();
  // Each step name once per attempt: a name is the key of its recorded result.
  const claim = (name) => {
    if (used.has(name)) throw new Fail(`step name ${JSON.stringify(name)} used twice`);
    used.add(name);
  };
  const ctx = {
    id: push.id,
    attempt: push.attempt,
    heartbeat: (progress) => callback(base, lease, "heartbeat", { progress }),
    // Run `fn` once per task: an earlier attempt's result is returned without running it;
    // a new result is recorded (and answered 200) before the step returns.
    async step(name, fn) {
      claim(name);
      if (recorded.has(name)) return recorded.get(name);
      const result = (await fn()) ?? null;
      await callback(base, lease, "step", { name, result });  // 409: lease lost, stop
      return result;
    },
    // A durable sleep, recorded as a step: once its time has passed, it is done.
    async sleep(name, ms) {
      const { until } = await ctx.step(name, () => ({ until: new Date(Date.now() + ms).toISOString() }));
      if (Date.parse(until) > Date.now()) throw new Sleep(until);
    },
    // A wait for an event: the gateway records its step (the event, or null at the timeout).
    async waitForEvent(step, { event, match = {}, timeout, lookback = 0 }) {
      claim(step);
      if (recorded.has(step)) return recorded.get(step);
      throw new WaitForEvent({ step, event, match, timeout, lookback });
    },
    // Invoke a child task (in `queue`, by default this task's): the gateway records the step
    // with the child's end; a success returns the child's result, any other end throws.
    async invoke(step, { name, payload = null, queue, timeout }) {
      claim(step);
      if (!recorded.has(step)) throw new Invoke({ step, name, payload, queue, timeout });
      const end = recorded.get(step);
      if (end.state !== "succeeded") throw new ChildFailed(end);
      return end.result;
    },
    // An HTTP call the gateway makes: the answer, or an error when none came.
    async call(step, url, { method = "GET", json = null, headers = {}, timeout = 60 } = {}) {
      claim(step);
      if (!recorded.has(step)) throw new CallOut({ step, url, method, json, headers, timeout });
      const answer = recorded.get(step);
      if (answer.status === undefined) throw new Error(`call ${step}: ${answer.kind}: ${answer.error}`);
      return answer;
    },
  };
  return ctx;
}

// How a task that threw ends, by callback: a sleep, a wait, nothing (lease lost), or an error.
async function report(e, base, lease) {
  if (e instanceof Sleep) await finish(base, lease, "sleep", { until: e.until });
  else if (e instanceof WaitForEvent) await finish(base, lease, "wait", e.body);
  else if (e instanceof Invoke) await finish(base, lease, "invoke", e.body);
  else if (e instanceof CallOut) await finish(base, lease, "call", e.body);
  else if (!e.lost) await finish(base, lease, "error", errorBody(e));
}

// A task answered 202: it runs on, keeps its lease with heartbeats, and reports by callback.
async function runInBackground(task, push, base, lease) {
  try {
    const result = await task.run(push.payload ?? {}, context(push, base, lease));
    await finish(base, lease, "result", { result });
  } catch (e) {
    await report(e, base, lease);
  }
}

async function handle(req, res) {
  if (req.method !== "POST") return answer(res, 200, { tasks: Object.keys(tasks) });
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) return problem(res, 413, "Push too large");
    chunks.push(chunk);
  }
  // Verify the exact bytes received: never re-serialise the body before verifying it.
  const raw = Buffer.concat(chunks);
  try {
    webhook.verify(raw, req.headers);
  } catch (e) {
    return problem(res, 401, "Invalid signature", e.message);
  }
  if (req.headers["jobgate-batch"] !== undefined) {
    return problem(res, 400, "Batch pushes are not served", "register this endpoint with batch_size 1");
  }
  let push;
  try {
    push = JSON.parse(raw.toString("utf8"));
  } catch {
    return problem(res, 400, "Invalid push body", "not JSON");
  }
  const lease = req.headers["jobgate-lease"];
  const base = req.headers["jobgate-callback"];
  if (!lease || !base || req.headers["webhook-id"] !== push.id) {
    return problem(res, 400, "Invalid push", "jobgate-lease, jobgate-callback or webhook-id");
  }
  const task = tasks[push.name];
  if (!task) return problem(res, 404, "Unknown task", `no task named ${JSON.stringify(push.name)}`);
  if (!task.inline) {
    answer(res, 202);
    runInBackground(task, push, base, lease);
    return;
  }
  try {
    return answer(res, 200, await task.run(push.payload ?? {}, context(push, base, lease)));
  } catch (e) {
    const waits = e instanceof Sleep || e instanceof WaitForEvent || e instanceof Invoke || e instanceof CallOut;
    if (waits) {  // never inline: 202, then the callback
      answer(res, 202);
      return report(e, base, lease);
    }
    if (e.lost) return problem(res, 409, "Lease lost", "the task was dispatched again");
    const status = e instanceof Fail ? 422 : 500;
    return answer(res, status, errorBody(e), "application/json", TASK_FAILURE);
  }
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    console.error(e);
    if (!res.headersSent) problem(res, 500, "Worker error", String(e));
  });
});
server.listen(port, host, () => console.log(`node worker on http://${host}:${port}/`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
