// Preload (`node --import`): OpenClaw's Date, setTimeout and setInterval run on a virtual clock
// (@sinonjs/fake-timers) that only the adapter moves, to the `now` of each sessiongate request.
// OpenClaw starts SQLite and lease worker threads with explicit execArgv; every Worker is made to
// preload clock-worker.mjs, whose Date reads the main thread's virtual now from shared memory, so
// no timestamp OpenClaw writes comes from the wall clock.
import FakeTimers from "@sinonjs/fake-timers";
import wt from "node:worker_threads";
import { fileURLToPath } from "node:url";
import module from "node:module";

// stdout carries only protocol lines: whatever OpenClaw prints goes to stderr.
const protocolWrite = process.stdout.write.bind(process.stdout);
globalThis.__sgProtocolWrite = (line) => protocolWrite(line);
process.stdout.write = process.stderr.write.bind(process.stderr);
if (process.env.SG_OC_DEBUG) { // a file that also gets everything OpenClaw prints (the parent keeps stderr to itself)
  const fs = await import("node:fs");
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => { fs.appendFileSync(process.env.SG_OC_DEBUG, chunk); return write(chunk, ...rest); };
  process.stdout.write = process.stderr.write;
}
globalThis.__sgReal = { setTimeout, clearTimeout, setImmediate, dateNow: Date.now.bind(Date) };
const start = Date.parse("2000-01-01T00:00:00Z"); // moved to the scenario's start before any OpenClaw code runs a step
const shared = new Float64Array(new SharedArrayBuffer(8));
shared[0] = start;
wt.setEnvironmentData("sg-clock", shared.buffer);
const clock = FakeTimers.install({
  now: start,
  toFake: ["Date", "setTimeout", "clearTimeout", "setInterval", "clearInterval"],
  ignoreMissingTimers: true,
});
for (const name of ["tick", "tickAsync", "next", "nextAsync", "runAll", "runAllAsync", "runToLast", "runToLastAsync", "setSystemTime"]) {
  const original = clock[name].bind(clock);
  clock[name] = (...args) => {
    const result = original(...args);
    const sync = () => { shared[0] = clock.now; };
    if (result && typeof result.then === "function") return result.finally(sync);
    sync();
    return result;
  };
}
// Every setTimeout/setInterval callback also keeps the shared cell current (a timer fires at its own instant).
globalThis.__sgClock = clock;
globalThis.__sgSharedNow = shared;
globalThis.__sgWorkers = 0;

const workerPreload = fileURLToPath(new URL("./clock-worker.mjs", import.meta.url));
const RealWorker = wt.Worker;
class VirtualClockWorker extends RealWorker {
  constructor(file, options = {}) {
    const inherited = options.execArgv ?? process.execArgv.filter((arg, i, all) => arg !== "--import" && all[i - 1] !== "--import");
    super(file, { ...options, execArgv: ["--import", workerPreload, ...inherited] });
    globalThis.__sgWorkers += 1;
  }
}
wt.Worker = VirtualClockWorker;
module.syncBuiltinESMExports();
