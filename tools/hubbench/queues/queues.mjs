// The reference queues of tools/hubbench/jobs.sh: pg-boss and graphile-worker
// on the PostgreSQL that hubd uses, one workload per run, one JSON line on
// stdout (the same fields as the jobs binary's rows).
//
//   node queues.mjs --queue=pgboss|graphile|graphile-batched
//       --workload=throughput|dead_worker --host=SOCKET_DIR --db=NAME
//       [--workers=8] [--duration=3] [--warmup=1] [--rounds=10]
//
// Needs HUB_QUEUES_MODULES (tools/setup.sh installs the modules there).
//
//   throughput  pg-boss: --workers loops, each send() -> fetch() (one job)
//               -> complete(): the same cycle as hub's row. graphile-worker
//               has no public fetch: --workers producers each addJob() in a
//               closed loop, and a runner with concurrentJobs = --workers
//               runs them (LISTEN/NOTIFY wakes it; its get_job per job and
//               complete_job per job); graphile-batched adds its batching
//               (localQueue.size = --workers + 1: one query locks a batch;
//               completeJobBatchDelay 0: completions of one tick in one
//               query). Every job is still one row created, fetched and
//               completed. Completions per second over the window.
//   dead_worker pg-boss only: a child process fetches the job and is sent
//               SIGKILL; from the kill to this process's fetch() returning
//               the job again, polled every 5 ms. The queue at pg-boss's
//               floors: expireInSeconds 1, retryLimit 1, retryDelay 0;
//               superviseIntervalSeconds and monitorIntervalSeconds 1.
//               (graphile-worker frees a dead worker's job after a fixed 4
//               hours: not run, see jobs.sh.)
import { spawn } from 'node:child_process';
import path from 'node:path';

const args = Object.fromEntries(process.argv.slice(2).map((a) => {
  const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
  if (!m) throw new Error(`bad argument ${a}`);
  return [m[1], m[2] ?? 'true'];
}));
const modules = process.env.HUB_QUEUES_MODULES;
if (!modules) throw new Error('HUB_QUEUES_MODULES is not set (tools/setup.sh)');
const load = (name, entry) => import(path.join(modules, name, entry));

const queue = args.queue;
const workload = args.workload ?? 'throughput';
const workers = Number(args.workers ?? 8);
const duration = Number(args.duration ?? 3) * 1000;
const warmup = Number(args.warmup ?? 1) * 1000;
const rounds = Number(args.rounds ?? 10);
const pg = { host: args.host, user: 'hub', database: args.db };
const connectionString = `postgresql://hub@/${args.db}?host=${encodeURIComponent(args.host)}`;
const head = (layout) => ({ target: queue, store: 'postgres', workload, layout });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

function throughputLine(done, latencies, seconds, extra = {}) {
  latencies.sort((a, b) => a - b);
  return {
    ...head(`c${workers}`), status: 'ok', ops: done, ops_per_s: done / seconds,
    p50_us: latencies.length ? quantile(latencies, 0.5) * 1000 : -1,
    p99_us: latencies.length ? quantile(latencies, 0.99) * 1000 : -1, ...extra,
  };
}

async function newBoss(options = {}) {
  const { PgBoss } = await load('pg-boss', 'dist/index.js');
  const boss = new PgBoss({ ...pg, max: workers + 4, ...options });
  boss.on('error', (e) => console.error('pg-boss:', e.message));
  await boss.start();
  return boss;
}

async function pgbossThroughput() {
  // No supervision or schedules during the window: the loops alone.
  const boss = await newBoss({ supervise: false, schedule: false });
  await boss.createQueue('bench');
  const start = now() + warmup;
  const end = start + duration;
  let done = 0;
  const latencies = [];
  await Promise.all(Array.from({ length: workers }, async () => {
    while (now() < end) {
      const t0 = now();
      await boss.send('bench', { n: 1 });
      const [job] = await boss.fetch('bench');
      if (!job) continue;
      await boss.complete('bench', job.id);
      const t1 = now();
      if (t1 >= start && t1 < end) {
        done++;
        latencies.push(t1 - t0);
      }
    }
  }));
  await boss.stop({ graceful: false, close: true });
  return throughputLine(done, latencies, duration / 1000);
}

async function graphileThroughput(batched) {
  const { run, makeWorkerUtils, Logger } = await load('graphile-worker', 'dist/index.js');
  // Quiet: its default logger prints a line per job.
  const logger = new Logger(() => () => {});
  const preset = {
    worker: {
      connectionString, concurrentJobs: workers, maxPoolSize: workers + 4,
      pollInterval: 2000, ...(batched ? { localQueue: { size: workers + 1 }, completeJobBatchDelay: 0 } : {}),
    },
  };
  const utils = await makeWorkerUtils({ connectionString, maxPoolSize: workers + 2, logger });
  await utils.migrate();
  const runner = await run({
    preset, noHandleSignals: true, logger,
    taskList: { bench: async () => {} },
  });
  // Completed = deleted (graphile-worker deletes a completed job's row):
  // jobs added in the window minus the growth of the table over it.
  const rows = () => utils.withPgClient(async (c) =>
    Number((await c.query('SELECT count(*) AS n FROM graphile_worker._private_jobs')).rows[0].n));
  const t = now();
  const start = t + warmup;
  const end = start + duration;
  let added = 0;
  let before = null;
  const marker = (async () => {
    await sleep(start - now());
    before = { rows: await rows(), added };
  })();
  await Promise.all(Array.from({ length: workers }, async () => {
    while (now() < end) {
      await utils.addJob('bench', { n: 1 });
      added++;
    }
  }));
  await marker;
  const after = { rows: await rows(), added };
  const seconds = (now() - start) / 1000;
  const done = (after.added - before.added) - (after.rows - before.rows);
  await runner.stop();
  await utils.release();
  return throughputLine(done, [], seconds, {
    backlog: after.rows,
    note: batched ? 'localQueue.size=workers+1, completeJobBatchDelay=0' : 'defaults (get_job and complete_job per job)',
  });
}

async function pgbossDeadWorker() {
  const boss = await newBoss({ superviseIntervalSeconds: 1, monitorIntervalSeconds: 1, schedule: false });
  await boss.createQueue('dead', { expireInSeconds: 1, retryLimit: 1, retryDelay: 0 });
  const ms = [];
  for (let round = 0; round < rounds; round++) {
    const id = await boss.send('dead', { round });
    const child = spawn(process.execPath, [process.argv[1], '--child', `--host=${args.host}`, `--db=${args.db}`], {
      stdio: ['ignore', 'pipe', 'inherit'], env: process.env,
    });
    const claimed = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out.trim());
      });
      child.on('exit', () => reject(new Error(`child exited: ${out}`)));
    });
    if (claimed !== `claimed ${id}`) throw new Error(`child: ${claimed}`);
    await sleep(100);
    const t0 = now();
    child.kill('SIGKILL');
    for (;;) {
      const [job] = await boss.fetch('dead');
      if (job) {
        if (job.id !== id) throw new Error('another job came back');
        ms.push(now() - t0);
        await boss.complete('dead', job.id);
        break;
      }
      if (now() - t0 > 120000) throw new Error('not re-run within 120 s');
      await sleep(5);
    }
    console.error(`queues: pgboss dead_worker round ${round}: ${ms.at(-1).toFixed(1)} ms`);
  }
  await boss.stop({ graceful: false, close: true });
  ms.sort((a, b) => a - b);
  return {
    ...head(`r${rounds}`), status: 'ok', samples: ms.length, p50_ms: quantile(ms, 0.5),
    p99_ms: quantile(ms, 0.99), min_ms: ms[0], max_ms: ms.at(-1),
    note: 'expireInSeconds=1 retryLimit=1 retryDelay=0 superviseIntervalSeconds=1 monitorIntervalSeconds=1',
  };
}

// The dead worker: fetches one job of 'dead', says so, and hangs.
async function child() {
  const boss = await newBoss({ supervise: false, schedule: false, migrate: false });
  for (;;) {
    const [job] = await boss.fetch('dead');
    if (job) {
      process.stdout.write(`claimed ${job.id}\n`);
      break;
    }
    await sleep(5);
  }
  setInterval(() => {}, 1 << 30);
}

const main = async () => {
  if (args.child) return child();
  let line;
  if (queue === 'pgboss' && workload === 'throughput') line = await pgbossThroughput();
  else if (queue === 'graphile' && workload === 'throughput') line = await graphileThroughput(false);
  else if (queue === 'graphile-batched' && workload === 'throughput') line = await graphileThroughput(true);
  else if (queue === 'pgboss' && workload === 'dead_worker') line = await pgbossDeadWorker();
  else throw new Error(`no ${workload} for ${queue}`);
  process.stdout.write(`${JSON.stringify(line)}\n`);
  process.exit(0);
};
main().catch((e) => {
  console.error(`queues: ${queue} ${workload}: ${e.stack || e}`);
  process.stdout.write(`${JSON.stringify({ ...head(''), status: 'error', error: String(e.message || e) })}\n`);
  process.exit(1);
});
