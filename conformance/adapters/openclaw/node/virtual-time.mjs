// sessiongate's OpenClaw adapter (gateway.mjs runs it): virtual time, and when a step is over.
import fs from "node:fs";
import { BLOCKED_MS, QUIET_MS, STEP_WALL_MS, clock, log, real } from "./state.mjs";
import { io } from "./wire.mjs";

// ---------- virtual time --------------------------------------------------------------------
export async function pump() {
  await clock.tickAsync(0);
  await new Promise((resolve) => real.setImmediate(resolve));
}
const realSleep = (ms) => new Promise((resolve) => real.setTimeout(resolve, ms));
// Quiet is not idle: OpenClaw's SQLite and lease workers (and its main thread, between the events
// the adapter sees) can compute for seconds on a busy machine. Whether the process is working is
// read from its CPU time (process.cpuUsage covers every thread), so how fast the machine is
// decides how long a step takes, never what happens in it.
// A share of wall time alone misjudges a process starved of CPU (a saturated machine gives it less
// than BUSY_SHARE while it works: catalog 05 once had a timer fired mid-turn), so a thread other
// than this one that is running or waiting for a CPU, or in uninterruptible I/O (state R or D in
// /proc/self/task/<tid>/stat), also counts as working, however little CPU it gets.
const BUSY_SHARE = Number(process.env.SG_OC_BUSY_SHARE || 0.2); // CPU per wall time above which the process is working
const cpu = { mark: process.cpuUsage(), at: 0, idleSince: 0 };
function threadsWorking() {
  let tids;
  try { tids = fs.readdirSync("/proc/self/task"); } catch { return false; } // not Linux: the CPU share alone
  for (const tid of tids) {
    if (tid === String(process.pid)) continue; // the main thread: it is running this
    let stat;
    try { stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, "utf8"); } catch { continue; } // exited meanwhile
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    if (state === "R" || state === "D") return true;
  }
  return false;
}
function sampleCpu(now) {
  if (now - cpu.at < 100) return;
  const used = process.cpuUsage(cpu.mark);
  if ((used.user + used.system) / 1000 > (now - cpu.at) * BUSY_SHARE || threadsWorking()) cpu.idleSince = now;
  cpu.mark = process.cpuUsage();
  cpu.at = now;
}
/** Pump the event loop, virtual time fixed, until `ready(idle)` after QUIET_MS with nothing seen
 * and no CPU used; `idle` is how long both have held. */
export async function settle(what, ready) {
  const start = real.dateNow();
  let seen = io.activity, quietSince = start;
  cpu.mark = process.cpuUsage(); cpu.at = start; cpu.idleSince = start;
  for (;;) {
    await pump();
    let now = real.dateNow();
    if (io.activity !== seen) { seen = io.activity; quietSince = now; cpu.idleSince = now; }
    if (now - quietSince > 20) { await realSleep(5); now = real.dateNow(); } // a quiet loop costs no CPU of its own
    sampleCpu(now);
    const idle = now - Math.max(quietSince, cpu.idleSince);
    if (idle >= QUIET_MS && ready(idle)) return;
    if (idle >= BLOCKED_MS && clock.countTimers() > 0) {
      // Stuck on one of OpenClaw's own timers (a retry backoff, a debounce): fire the next one,
      // running OpenClaw's clock ahead of sessiongate's by its delay (docs/openclaw.md).
      await clock.nextAsync();
      quietSince = real.dateNow();
      continue;
    }
    if (process.env.SG_OC_DEBUG && idle >= 1000 && !settle.dumped) {
      settle.dumped = true;
      log(`idle in ${what}; virtual timers:`, Object.values(clock.timers ?? {}).map((t) => `${t.callAt - clock.now}ms${t.interval ? "/" + t.interval : ""} ${String(t.func).slice(0, 160).replace(/\s+/g, " ")}`).join("\n  "));
    }
    if (now - start > STEP_WALL_MS) throw new Error(`OpenClaw did not settle within ${STEP_WALL_MS} ms of wall clock: ${what}`);
  }
}
/** Move virtual time to `now`. A jump moves Date, and OpenClaw's own timers keep the time they had
 * left (fake-timers setSystemTime): firing each on the way would expire OpenClaw's state lease,
 * whose heartbeat is renewed by a worker thread on real time (src/state/openclaw-state-lease.ts),
 * and every later store write would fail as "another OpenClaw process owns state-lifecycle". */
export async function advanceTo(now) {
  if (now > clock.now) {
    clock.setSystemTime(now);
    await pump();
  }
}

export async function waitFor(promise, what) {
  let done = false, value, failed;
  promise.then((v) => { done = true; value = v; }, (e) => { done = true; failed = e; });
  const start = real.dateNow();
  while (!done) {
    await pump();
    if (real.dateNow() - start > STEP_WALL_MS) throw new Error(`OpenClaw did not finish ${what} within ${STEP_WALL_MS} ms of wall clock`);
  }
  if (failed) throw failed;
  return value;
}
