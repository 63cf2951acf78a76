// One graphile-worker process running a no-op task until SIGTERM.
//
//   node worker.mjs URL best|defaults
//
// "best" is the tuning graphile-worker's performance page recommends for
// many tiny jobs: 100 concurrent jobs, a local queue of 1,000 jobs, and
// completions and failures batched for 100 ms. "defaults" sets nothing.
import { run } from "graphile-worker";

const [url, tuning] = process.argv.slice(2);
if (!url || !["best", "defaults"].includes(tuning)) {
  console.error("usage: node worker.mjs DATABASE_URL best|defaults");
  process.exit(2);
}

const best = {
  concurrentJobs: 100,
  localQueue: { size: 1000 },
  completeJobBatchDelay: 100,
  failJobBatchDelay: 100,
};

const runner = await run({
  preset: { worker: { connectionString: url, ...(tuning === "best" ? best : {}) } },
  taskList: { noop: async () => {} },
  noHandleSignals: true,
  logger: undefined,
});
// Ready: the parent waits for this line before it starts the clock.
console.log("ready");
process.on("SIGTERM", () => {
  runner.stop().then(() => process.exit(0), () => process.exit(1));
});
await runner.promise;
