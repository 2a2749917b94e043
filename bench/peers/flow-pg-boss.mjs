// Item e of bench/workflows.sh: pg-boss's flows (FlowJob with dependsOn,
// boss.flow()) beside queue's dependencies.
//
//   node flow-pg-boss.mjs CONNECTION_STRING chain N
//     one flow of N jobs, each depending on the one before; then, from one
//     connection, fetch (batchSize 100), complete, boss.resolveFlow(), again
//     until all N are completed. Prints jobs/s over that loop.
//   node flow-pg-boss.mjs CONNECTION_STRING fanin N CONSUMERS
//     one flow of N parents and one child that depends on all of them; then
//     CONSUMERS loops at once (a pool of CONSUMERS + 2 connections), each
//     fetching one job and completing it until none is left; then one
//     boss.resolveFlow(), and the child fetched (batchSize 10). Prints
//     "parents/s, parents/s counting the release, children fetched".
//
// pg-boss 12.38.0 releases a flow's children out of band: completion does no
// dependency work, and a background resolver (its Navigator, every
// flowIntervalSeconds: 5 by default, 1 at least) or boss.resolveFlow()
// counts completed parents down on their children. The loops here call
// resolveFlow() themselves after every completion (chain) or once at the end
// (fan-in), the fastest pg-boss's API allows: with its background resolver
// alone, a chain advances one job per flowIntervalSeconds. supervise and
// schedule are off, so that no background pass runs during a measurement.
import { PgBoss } from "pg-boss";

const [connectionString, shape, n, consumers] = [
  process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5] || 8),
];
const boss = new PgBoss({
  connectionString, schedule: false, supervise: false, max: consumers + 2,
});
boss.on("error", (e) => console.error(e));
await boss.start();

async function fresh(name) {
  await boss.deleteQueue(name).catch(() => {});
  await boss.createQueue(name);
}

if (shape === "chain") {
  await fresh("chain");
  const jobs = [];
  for (let i = 0; i < n; i++) {
    jobs.push({ ref: `c${i}`, name: "chain", data: { n: i }, dependsOn: i ? [`c${i - 1}`] : undefined });
  }
  await boss.flow(jobs);
  const start = process.hrtime.bigint();
  let done = 0;
  while (done < n) {
    const got = await boss.fetch("chain", { batchSize: 100 });
    if (got.length) {
      await boss.complete("chain", got.map((j) => j.id));
      done += got.length;
    }
    await boss.resolveFlow();
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(Math.round(n / seconds));
} else if (shape === "fanin") {
  await fresh("fanin");
  await fresh("fanin_child");
  const jobs = [];
  for (let i = 0; i < n; i++) jobs.push({ ref: `p${i}`, name: "fanin", data: { n: i } });
  jobs.push({ ref: "child", name: "fanin_child", data: {}, dependsOn: jobs.map((j) => j.ref) });
  await boss.flow(jobs);
  const start = process.hrtime.bigint();
  let done = 0;
  const consumer = async () => {
    for (;;) {
      const got = await boss.fetch("fanin", { batchSize: 1 });
      if (!got.length) return;
      await boss.complete("fanin", got.map((j) => j.id));
      done += got.length;
    }
  };
  await Promise.all(Array.from({ length: consumers }, consumer));
  const completed = Number(process.hrtime.bigint() - start) / 1e9;
  await boss.resolveFlow();
  const released = Number(process.hrtime.bigint() - start) / 1e9;
  const children = await boss.fetch("fanin_child", { batchSize: 10 });
  if (done !== n) console.error(`fan-in: ${done} of ${n} parents completed`);
  console.log(`${Math.round(n / completed)} ${Math.round(n / released)} ${children.length}`);
} else {
  console.error(`unknown shape ${shape}`);
  process.exitCode = 2;
}
await boss.stop({ graceful: false, wait: false }).catch(() => {});
process.exit(process.exitCode || 0);
