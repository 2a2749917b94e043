// Item 5b of bench/compare.sh: pg-boss drains N no-op jobs.
// Usage: node drain-pg-boss.mjs CONNECTION_STRING N
// Inserts N jobs into a queue, then starts one worker fetching batches of
// 100 (batchSize), fetching again at once while batches come back full
// (burstWhenBatchFull, pg-boss's own setting for a backlog), and prints the
// drain rate: N / (from the worker's start until no job of the queue is
// left unfinished, looked at every 10 ms).
// pg-boss marks each job completed and keeps it (until its retention
// ends), as a queue that keeps a day of history does.
import { PgBoss } from "pg-boss";
import pg from "pg";

const [connectionString, n] = [process.argv[2], Number(process.argv[3])];
const boss = new PgBoss({ connectionString, schedule: false, supervise: false });
boss.on("error", (e) => console.error(e));
await boss.start();
await boss.deleteQueue("noop").catch(() => {});
await boss.createQueue("noop");
for (let added = 0; added < n; added += 10000) {
  const jobs = [];
  for (let i = added; i < Math.min(n, added + 10000); i++) jobs.push({ data: { n: i } });
  await boss.insert("noop", jobs);
}
const client = new pg.Client({ connectionString });
await client.connect();
await client.query("VACUUM ANALYZE");
const start = process.hrtime.bigint();
await boss.work(
  "noop",
  { batchSize: 100, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 },
  async () => {},
);
for (;;) {
  const { rows } = await client.query(
    "SELECT count(*)::int AS left FROM pgboss.job WHERE name = 'noop' AND state < 'completed'",
  );
  if (rows[0].left === 0) break;
  await new Promise((r) => setTimeout(r, 10));
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
await boss.stop({ graceful: false, wait: false }).catch(() => {});
await client.end();
console.log(Math.round(n / seconds));
process.exit(0);
