// Item 5w of bench/compare.sh: graphile-worker drains N no-op jobs.
// Usage: node drain-graphile-worker.mjs CONNECTION_STRING N
// Adds N jobs of a no-op task, starts a runner with the settings of
// graphile-worker's own performance page (concurrency 10, a local queue
// of 500, completions batched with no delay), and prints the drain rate:
// N / (from the runner's start until no job is left in its table, looked
// at every 10 ms, as compare.sh looks at queue_live). graphile-worker
// deletes each job once it succeeded: it keeps nothing, as retention 0.
import { Logger, run, runMigrations } from "graphile-worker";
import pg from "pg";

const [connectionString, n] = [process.argv[2], Number(process.argv[3])];
// (quiet: by default it logs a line per job)
const logger = new Logger(() => () => {});
const preset = {
  worker: {
    connectionString,
    concurrentJobs: 10,
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
    pollInterval: 1000,
    logger,
  },
};
await runMigrations({ connectionString, logger });
const client = new pg.Client({ connectionString });
await client.connect();
await client.query("DELETE FROM graphile_worker._private_jobs");
// 10,000 jobs a statement, through graphile-worker's own add_jobs
for (let added = 0; added < n; added += 10000) {
  await client.query(
    `SELECT count(*) FROM graphile_worker.add_jobs(array(
         SELECT ('noop', json_build_object('n', g), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
           FROM generate_series($1::int, $2::int) g))`,
    [added + 1, Math.min(n, added + 10000)],
  );
}
await client.query("VACUUM ANALYZE");
const start = process.hrtime.bigint();
const runner = await run({
  preset,
  noHandleSignals: true,
  logger,
  taskList: { noop: async () => {} },
});
for (;;) {
  const { rows } = await client.query("SELECT count(*)::int AS left FROM graphile_worker._private_jobs");
  if (rows[0].left === 0) break;
  await new Promise((r) => setTimeout(r, 10));
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
await runner.stop();
await client.end();
console.log(Math.round(n / seconds));
