// One graphile-worker burn-down on a fresh database, timed the way
// `mcq bench queue` times its own (docs/queue-perf.md, "Measuring a peer
// beside mcq"): from the first job locked to the last job finished, both
// read from the database's clock.
//
//   node burn.mjs DATABASE_URL JOBS WORKERS best|defaults
//
// graphile-worker deletes a job when it completes, so the clock's end is
// the database time of the first poll (every 10 ms, on one connection)
// that finds the jobs table empty, and its start the earliest `locked_at`
// any poll saw (the first jobs locked stay locked until their completion
// batch is written, at least 100 ms later under the best tuning). Prints
// one JSON line.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { makeWorkerUtils } from "graphile-worker";
import pg from "pg";

const [url, jobsArg, workersArg, tuning] = process.argv.slice(2);
const jobs = Number(jobsArg);
const workers = Number(workersArg);
if (!url || !(jobs > 0) || !(workers > 0) || !["best", "defaults"].includes(tuning)) {
  console.error("usage: node burn.mjs DATABASE_URL JOBS WORKERS best|defaults");
  process.exit(2);
}

const utils = await makeWorkerUtils({ connectionString: url });
await utils.migrate();

// Enqueue: one bulk call, timed around it.
const specs = Array.from({ length: jobs }, () => ({ identifier: "noop", payload: {} }));
const t0 = process.hrtime.bigint();
await utils.addJobs(specs);
const enqueueMs = Number(process.hrtime.bigint() - t0) / 1e6;

const poll = new pg.Client({ connectionString: url });
await poll.connect();
const POLL = `SELECT count(*)::int AS left, min(locked_at) AS first, clock_timestamp() AS now
              FROM graphile_worker._private_jobs`;

// The workers start on the full queue; the clock starts at the first lock.
const here = new URL(".", import.meta.url).pathname;
const children = [];
for (let i = 0; i < workers; i++) {
  const child = spawn(process.execPath, [here + "worker.mjs", url, tuning], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
}
await Promise.all(
  children.map(async (child) => {
    for await (const line of createInterface({ input: child.stdout })) {
      if (line === "ready") return;
    }
    throw new Error("a worker ended before it was ready");
  }),
);

let first = null;
let end = null;
const deadline = Date.now() + 600_000;
for (;;) {
  const { rows } = await poll.query(POLL);
  const row = rows[0];
  if (row.first && (!first || row.first < first)) first = row.first;
  if (row.left === 0) {
    end = row.now;
    break;
  }
  if (Date.now() > deadline) throw new Error(`${row.left} jobs left after 10 minutes`);
  await new Promise((r) => setTimeout(r, 10));
}

for (const child of children) child.kill("SIGTERM");
await Promise.all(children.map((child) => once(child, "exit")));
await poll.end();
await utils.release();

if (!first) throw new Error("no poll saw a locked job: the clock has no start");
const ms = end - first;
console.log(
  JSON.stringify({
    peer: "graphile-worker",
    tuning,
    jobs,
    workers,
    enqueue_jobs_per_s: Math.round(jobs / (enqueueMs / 1e3)),
    burn_down_ms: ms,
    burn_down_jobs_per_s: Math.round(jobs / (ms / 1e3)),
  }),
);
