// sessiongate's OpenClaw adapter: an `exec:` gateway (docs/protocol.md, v2) that boots OpenClaw's
// real code once per process and drives it per scenario, each in a fresh state dir. Run as
//   node --import ./clock.mjs gateway.mjs      (env: SG_OC_ROOT, SG_OC_MEMORY; see docs/openclaw.md)
// Messages go through OpenClaw's own inbound path (plugin-sdk channel-inbound
// dispatchInboundDirectDm, as a DM); the model is a fake OpenAI-compatible streaming server on
// 127.0.0.1 whose answers are sessiongate's LLM replies; hooks come from a recorder plugin
// (sg-recorder/) and the bundled session-memory hook; the durable state is read from OpenClaw's
// own SQLite store. The Python side (conformance/adapters/openclaw) kills and respawns this
// process on a crash, on the same state dir.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import readline from "node:readline";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import { Regions } from "./regions.mjs";

const clock = globalThis.__sgClock;
const real = globalThis.__sgReal;
if (!clock) throw new Error("gateway.mjs needs the virtual clock: run it as node --import ./clock.mjs gateway.mjs");
const ROOT = process.env.SG_OC_ROOT; // the install: ROOT/node_modules/openclaw
const MEMORY = process.env.SG_OC_MEMORY || "session-memory"; // which hook is on_session_end: session-memory | before-reset
const HERE = path.dirname(fileURLToPath(import.meta.url));
const STEP_WALL_MS = Number(process.env.SG_OC_STEP_WALL_MS || 300000);
const QUIET_MS = Number(process.env.SG_OC_QUIET_MS || 250); // wall time with no OpenClaw activity that ends a step
const BLOCKED_MS = Number(process.env.SG_OC_BLOCKED_MS || 3000); // a dispatch neither done nor asking the model this long is queued
const log = (...a) => {
  const line = `[sg-openclaw] ${a.join(" ")}\n`;
  process.stderr.write(line);
};

// ---------- the wire ----------------------------------------------------------------------
const inbox = [];
let wake = null;
readline.createInterface({ input: process.stdin }).on("line", (line) => { inbox.push(line); wake?.(); }).on("close", () => process.exit(0));
async function nextLine() {
  while (!inbox.length) await new Promise((resolve) => { wake = resolve; });
  wake = null;
  return JSON.parse(inbox.shift());
}
const send = (message) => globalThis.__sgProtocolWrite(JSON.stringify(message) + "\n");
let inRequest = false;
let calls = Promise.resolve();
let activity = 0; // bumped by everything OpenClaw does that the adapter sees: ends a quiet period
/** A call on the harness, answered before anything else is written; serialized, only inside a request. */
function call(name, args) {
  activity++;
  const made = calls.then(async () => {
    if (!inRequest) throw new Error(`OpenClaw made ${name} between sessiongate requests (after its step was over)`);
    send({ call: name, args });
    const answer = await nextLine();
    if ("error" in answer) throw Object.assign(new Error(`${name}: ${answer.error}`), { answer });
    return answer.result;
  });
  calls = made.catch(() => {});
  return made;
}
const note = (what, detail) => call("note", detail ? { what, detail } : { what }).catch((e) => log("note failed:", e.message));

// ---------- virtual time --------------------------------------------------------------------
async function pump() {
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
async function settle(what, ready) {
  const start = real.dateNow();
  let seen = activity, quietSince = start;
  cpu.mark = process.cpuUsage(); cpu.at = start; cpu.idleSince = start;
  for (;;) {
    await pump();
    let now = real.dateNow();
    if (activity !== seen) { seen = activity; quietSince = now; cpu.idleSince = now; }
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
async function advanceTo(now) {
  if (now > clock.now) {
    clock.setSystemTime(now);
    await pump();
  }
}

// ---------- the fake model ------------------------------------------------------------------
const textOf = (m) => (typeof m?.content === "string" ? m.content : (m?.content || []).map((p) => p.text || "").join(""));
const tagsOf = (text) => text.match(/\[t\d+\]/g) || [];
const pendingReplies = new Map(); // sessiongate request id -> http response
let turnChat = new Map(); // turn tag -> chat name (from deliver_message)
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (chunk) => { body += chunk; });
  req.on("end", async () => {
    activity++;
    let request = {};
    try { request = JSON.parse(body); } catch { /* an empty body asks nothing */ }
    // OpenClaw appends its internal context as a user message of its own after the user's.
    const messages = (request.messages || []).filter((m) => m.role === "user" || m.role === "assistant").map(textOf)
      .filter((text) => !text.startsWith("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"));
    const last = messages.at(-1) ?? "";
    const tag = tagsOf(last).at(-1);
    const chat = tag ? turnChat.get(tag) : undefined;
    if (process.env.SG_OC_DEBUG) log(`model request at ${new Date().toISOString()}: tag=${tag} chat=${chat} body=${JSON.stringify(request.messages?.slice(1))}`);
    if (!chat || !scenario) { // not a conversation turn (a slug or title request): answer it at once
      return reply(res, request, "ok");
    }
    try {
      await collectMemoryFiles(false); // a memory file written before this request ended its session first
    } catch (err) {
      log("collecting memory files failed:", err.message);
    }
    // Held until the step is over, then handed to the harness by chat (askModel): which of two
    // turns started at one instant asks first, or whether a freed lane slot's next turn asks
    // before the freed turn's reply is delivered, is OpenClaw's promise and file-I/O order.
    heldRequests.push({ res, request, chat, messages });
    for (const turn of scenario.open) if (turn.chat === chat && !turn.done) turn.asked = true;
  });
});
const heldRequests = [];
/** The model requests held in this step, to the harness in chat order (then arrival order). */
async function askModel() {
  const held = heldRequests.splice(0).map((h, i) => ({ ...h, i })).sort((a, b) => (a.chat < b.chat ? -1 : a.chat > b.chat ? 1 : a.i - b.i));
  for (const { res, request, chat, messages } of held) {
    try {
      const session = labelOf(await currentSessionOf(chat));
      const id = await call("llm.request", { chat, session, prompt: messages });
      pendingReplies.set(id, { res, request, chat });
    } catch (err) {
      log("llm.request failed:", err.message);
      res.destroy();
    }
  }
}
function reply(res, request, text) {
  const base = { id: "sg", created: 0, model: request.model };
  const usage = { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 };
  if (!request.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }], usage }));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  const chunk = (o) => res.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", ...o })}\n\n`);
  chunk({ choices: [{ index: 0, delta: { role: "assistant", content: text }, finish_reason: null }] });
  chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
  chunk({ choices: [], usage });
  res.end("data: [DONE]\n\n");
}

// ---------- sessions: OpenClaw's id, split at its reset rows ---------------------------------
// Since 2026.8.1 a reset keeps the session id and appends a `reset` transcript row: a sessiongate
// session is one segment between resets, named `ocN` (N: the id's rank by its session_windows
// row, so names are the same in every run) and `ocN.K` for its K-th segment.
// Each scenario is an OpenClaw agent of its own (agents.list, `default: true`), with its own
// workspace and store under the process's state dir: OpenClaw cannot move its state dir in a
// running process (its shared state database and leases stay bound to the first one).
let scenario = null; // {agent, stateDir, workspace, cfg, open, memorySeen, ended, rank, keys, resetRows}
const dbPath = () => path.join(scenario.stateDir, `agents/${scenario.agent}/agent/openclaw-agent.sqlite`);
const legacyDir = () => path.join(scenario.stateDir, `agents/${scenario.agent}/sessions`);
function readStore() {
  const store = { ids: [], segments: new Map(), routing: [] }; // segments: id -> [[role, content]...] per segment
  if (fs.existsSync(dbPath())) {
    // OpenClaw's own open handle when it has one: a second connection's sidecars trip its WAL
    // split-brain guard (src/infra/sqlite-wal-split-brain.ts), which SIGKILLs the process.
    const own = agentDb.ifOpen?.({ agentId: scenario.agent, env: process.env })?.db;
    const db = own ?? new DatabaseSync(dbPath(), { readOnly: true });
    try {
      const tables = new Set(db.prepare("select name from sqlite_master where type = 'table'").all().map((r) => r.name));
      if (tables.has("session_windows")) store.ids = db.prepare("select session_id from session_windows order by rowid").all().map((r) => r.session_id);
      if (tables.has("transcript_events")) {
        for (const row of db.prepare("select session_id, event_json from transcript_events order by session_id, seq").all()) {
          if (!store.segments.has(row.session_id)) store.segments.set(row.session_id, [[]]);
          const segs = store.segments.get(row.session_id);
          const event = JSON.parse(row.event_json);
          if (event.type === "reset") segs.push([]);
          else if (event.type === "message" && (event.message?.role === "user" || event.message?.role === "assistant")) segs.at(-1).push([event.message.role, textOf(event.message)]);
        }
      }
      if (tables.has("session_nodes")) store.routing = db.prepare("select session_key, current_session_id from session_nodes order by session_key").all();
    } finally { if (!own) db.close(); }
  } else if (fs.existsSync(legacyDir())) { // before 2026.8: sessions.json plus one <id>.jsonl per session
    const index = path.join(legacyDir(), "sessions.json");
    const entries = fs.existsSync(index) ? JSON.parse(fs.readFileSync(index, "utf8")) : {};
    // <id>.jsonl, renamed <id>.jsonl.reset.<instant> at a reset; not <id>.trajectory.jsonl (the run trace)
    const files = fs.readdirSync(legacyDir()).filter((f) => /^[^.]+\.jsonl(\.reset\..*)?$/.test(f)).sort();
    const keyOf = new Map(Object.entries(entries).map(([key, entry]) => [entry.sessionId, key]));
    for (const file of files) {
      const id = file.slice(0, file.indexOf(".jsonl"));
      const lines = fs.readFileSync(path.join(legacyDir(), file), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
      const first = lines.find((e) => e.type === "session");
      store.segments.set(id, [lines.filter((e) => e.type === "message" && ["user", "assistant"].includes(e.message?.role)).map((e) => [e.message.role, textOf(e.message)])]);
      // Sessions created at one virtual instant share the header timestamp: the tie is broken by
      // the session key (its chat), never by the random id; an archived id has none ("~").
      store.ids.push([first?.timestamp ?? "", keyOf.get(id) ?? "~", id]);
    }
    for (const [key, entry] of Object.entries(entries)) if (!store.ids.some(([, , id]) => id === entry.sessionId)) store.ids.push(["~", key, entry.sessionId]);
    store.ids = store.ids.sort().map(([, , id]) => id);
    store.routing = Object.entries(entries).sort().map(([key, entry]) => ({ session_key: key, current_session_id: entry.sessionId }));
  }
  for (const id of store.ids) if (!scenario.rank.has(id)) rankId(id);
  return store;
}
/** Name the next OpenClaw session id `oc<N>`. The names are the adapter's bookkeeping and outlive a
 * respawn (kept beside the scenario's workspace): a session deleted before a crash or a stop is
 * gone from the store, and ranking the survivors again would rename them. */
function rankId(id) {
  scenario.rank.set(id, scenario.rank.size + 1);
  fs.writeFileSync(ranksPath(), JSON.stringify([...scenario.rank.keys()]));
}
const ranksPath = () => path.join(path.dirname(scenario.workspace), "sg-session-names.json");
const labelOf = ({ id, segment }) => {
  if (!scenario.rank.has(id)) rankId(id);
  return `oc${scenario.rank.get(id)}${segment ? `.${segment + 1}` : ""}`;
};
function currentSegment(id) {
  const segs = readStore().segments.get(id);
  return segs ? segs.length - 1 : 0;
}
async function currentSessionOf(chat) {
  const key = scenario.keys.get(chat);
  const node = readStore().routing.find((r) => r.session_key === key);
  if (!node) throw new Error(`OpenClaw's store routes no session for ${chat} (${key})`);
  return { id: node.current_session_id, segment: currentSegment(node.current_session_id) };
}
function durableState() {
  if (!scenario) return { sessions: [], routing: [] };
  const store = readStore();
  const sessions = [];
  for (const id of store.ids) {
    const segs = store.segments.get(id) ?? [[]];
    segs.forEach((messages, segment) => sessions.push({ id: labelOf({ id, segment }), parent: null, messages: messages.map(([role, content]) => [role, content, "visible"]) }));
  }
  const chats = new Map([...scenario.keys].map(([chat, key]) => [key, chat]));
  const routing = store.routing.filter((r) => chats.has(r.session_key))
    .map((r) => [chats.get(r.session_key), labelOf({ id: r.current_session_id, segment: (store.segments.get(r.current_session_id) ?? [[]]).length - 1 })]);
  return { sessions, routing };
}

// ---------- hooks -----------------------------------------------------------------------------
globalThis.__sgHook = async (name, event, ctx) => {
  if (!scenario) return;
  activity++;
  const id = event.sessionId ?? ctx.sessionId;
  if (process.env.SG_OC_DEBUG) log(`hook ${name}: id=${id} event=${JSON.stringify(event).slice(0, 600)} ctx=${JSON.stringify(ctx).slice(0, 300)}`);
  if (name === "agent_end" && event.success !== false) { // a turn answered: what a memory provider's sync_turn sees
    const messages = (event.messages || []).filter((m) => m.role === "user" || m.role === "assistant");
    const user = [...messages].reverse().find((m) => m.role === "user");
    const assistant = messages.at(-1)?.role === "assistant" ? messages.at(-1) : undefined;
    if (id && user && assistant && tagsOf(textOf(user)).length) {
      await call("recorder.sync_turn", { session: labelOf({ id, segment: currentSegment(id) }), user: textOf(user), assistant: textOf(assistant) });
    }
  } else if (name === "session_end") { // plugin session_end: on_session_finalize of the segment that ended
    const ended = endedSegment(id);
    scenario.ended.set(id, ended);
    await collectMemoryFiles(false); // a memory file already written ended the session before this hook
    await call("hooks.on_session_finalize", { session: labelOf(ended), reason: String(event.reason ?? "unknown") });
  } else if (name === "before_reset") {
    await note("openclaw before_reset", { session: labelOf(scenario.ended.get(id) ?? endedSegment(id)), reason: String(event.reason ?? "") });
    if (MEMORY === "before-reset") {
      const transcript = (event.messages || []).filter((m) => m.role === "user" || m.role === "assistant").map((m) => [m.role, textOf(m)]);
      await call("recorder.on_session_end", { session: labelOf(scenario.ended.get(id) ?? endedSegment(id)), transcript });
    }
  } else if (name === "session_start") {
    await collectMemoryFiles(false);
    await note("openclaw session_start", { session: labelOf({ id, segment: currentSegment(id) }) });
  }
};
/** The segment a reset ended: the last but one if OpenClaw already wrote the reset row, else the last. */
function endedSegment(id) {
  const segs = readStore().segments.get(id);
  const marked = scenario.resetRows.get(id) ?? 0;
  if (!segs) return { id, segment: marked }; // its rows were deleted: the segment it was in when they went
  const last = segs.length - 1;
  scenario.resetRows.set(id, last);
  return { id, segment: last > marked ? last - 1 : last };
}
/** session-memory's artifacts: each file it wrote since the last step is one on_session_end. */
async function collectMemoryFiles(flush = true) {
  if (MEMORY !== "session-memory" || !scenario) return;
  if (flush) await memoryHook?.flushSessionMemoryWritesForTest?.();
  const dir = path.join(scenario.workspace, "memory");
  if (!fs.existsSync(dir)) return;
  for (const file of fs.readdirSync(dir).sort()) {
    if (scenario.memorySeen.has(file)) continue;
    scenario.memorySeen.add(file);
    const text = fs.readFileSync(path.join(dir, file), "utf8");
    const id = text.match(/\*\*Session ID\*\*: (\S+)/)?.[1];
    const transcript = [...text.matchAll(/^(user|assistant): (.*)$/gm)].map((m) => [m[1], unquote(m[2])]);
    if (!id) { await note("openclaw memory file without a session id", { file }); continue; }
    await call("recorder.on_session_end", { session: labelOf(scenario.ended.get(id) ?? { id, segment: currentSegment(id) }), transcript });
  }
}
const unquote = (s) => { try { return JSON.parse(s); } catch { return s; } };

// ---------- boot (once per process) -----------------------------------------------------------
// Where the functions the adapter calls live, by release (source file, function): OpenClaw moves
// them. A release not listed takes the newest layout and fails at boot naming what moved.
const RELEASE = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/openclaw/package.json"), "utf8")).version;
const SEAMS = {
  "2026.9.6": {
    agentDbIfOpen: ["src/state/openclaw-agent-db.ts", "getOpenClawAgentDatabaseIfOpen"],
    resolveLanes: true,
    drain: ["src/gateway/active-sessions-shutdown-drain.ts", "drainActiveSessionsForShutdown"],
    plugins: ["src/plugins/loader.ts", "loadAndActivateRootPluginRegistry"],
    hooks: ["src/hooks/loader.ts", "prepareInternalHooks"],
    inbound: ["openclaw/plugin-sdk/channel-inbound", "dispatchInboundDirectDm"],
    noneMode: true, // session.reset.mode "none"
    agentList: false, // agents.entries.<id>
    // A turn cut off by a stop leaves its session entry `running` with a restart-recovery claim
    // (src/auto-reply/reply/restart-recovery-claim.ts): the next message is refused ("restart
    // recovery claim changed before agent adoption", admitUserTurn) until the gateway's startup
    // recovery settles it (scheduleRestartAbortedMainSessionRecovery,
    // src/agents/main-session-recovery/main-session-restart-recovery-runtime.ts, from
    // src/gateway/server-startup-post-attach.ts). That recovery replays the turn through the
    // gateway instance's recovery runtime (src/gateway/server-instance-runtime.ts: dispatchAgent
    // runs the gateway's own `agent` method in process, sendRecoveryNotice the outbound channel),
    // which needs the whole gateway server and a Telegram outbound; the adapter has neither, so a
    // restart after a cut-off turn is declared unsupported (docs/openclaw.md).
    restartRecovery: true,
  },
  // Before the 2026.8 store (sessions.json and <id>.jsonl: no agent database handle to share), the
  // lanes sized straight from the config, the session-end drain in the reset service, plugins loaded
  // (and activated) by loadOpenClawPlugins, internal hooks registered by loadInternalHooks.
  "2026.7.35": {
    agentDbIfOpen: null,
    resolveLanes: false,
    drain: ["src/gateway/session-reset-service.ts", "drainActiveSessionsForShutdown"],
    plugins: ["src/plugins/loader.ts", "loadOpenClawPlugins"],
    hooks: ["src/hooks/loader.ts", "loadInternalHooks"],
    inbound: ["openclaw/plugin-sdk/direct-dm", "dispatchInboundDirectDmWithRuntime"], // src/channels/direct-dm.ts, with the plugin runtime
    noneMode: false, // src/config/zod-schema.session.ts: daily | idle only
    agentList: true, // src/config/zod-schema.agents.ts: agents.list [{id, default, workspace}]
    restartRecovery: false, // no restart-recovery claims: the next message is admitted
  },
};
const seamsOf = (release) => SEAMS[release] ?? SEAMS["2026.9.6"];
let messageCount = 0;
let inbound = null, memoryHook = null, resetConfig = null, drainForShutdown = null, booted = false;
const agentDb = {};
async function boot() {
  if (booted) return;
  const dist = fs.realpathSync(path.join(ROOT, "node_modules/openclaw/dist"));
  const regions = new Regions(dist, path.join(ROOT, "regions.json"));
  const bootDir = process.env.SG_OC_STATE;
  if (!bootDir) throw new Error("gateway.mjs needs SG_OC_STATE, the process's state dir (the Python side makes one per process)");
  Object.assign(process.env, { HOME: path.join(bootDir, "home"), OPENCLAW_STATE_DIR: path.join(bootDir, "state"), OPENCLAW_CONFIG_PATH: path.join(bootDir, "openclaw.json") });
  fs.mkdirSync(path.join(bootDir, "home"), { recursive: true });
  const workspace = path.join(bootDir, "workspace");
  fs.mkdirSync(workspace, { recursive: true });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const seams = seamsOf(RELEASE);
  agentDb.ifOpen = seams.agentDbIfOpen ? await regions.load(...seams.agentDbIfOpen) : null;
  const cfg = writeConfig("main", workspace, policyOf({ mode: "none" }), {}, {});
  resetConfig = await regions.load("src/config/runtime-snapshot.ts", "resetConfigRuntimeState");
  const { getRuntimeConfig } = await import("openclaw/plugin-sdk/config-runtime");
  const config = getRuntimeConfig();
  // The gateway's own start-up sizes its command lanes from the config (maxConcurrent): without
  // it the main lane runs one agent turn at a time, process-wide.
  const applyLanes = await regions.load("src/gateway/server-lanes.ts", "applyGatewayLaneConcurrency");
  if (seams.resolveLanes) applyLanes((await regions.load("src/gateway/server-lanes.ts", "resolveGatewayLaneConcurrency"))(config), { gatewayStart: true });
  else applyLanes(config);
  drainForShutdown = await regions.load(...seams.drain);
  const loadPlugins = await regions.load(...seams.plugins);
  await waitFor(Promise.resolve().then(() => loadPlugins({ config, workspaceDir: workspace })), "loading plugins");
  if (seams.hooks[1] === "prepareInternalHooks") {
    const prepareInternalHooks = await regions.load(...seams.hooks);
    const prepared = await waitFor(prepareInternalHooks(config, workspace, { failureMode: "best-effort" }), "loading internal hooks");
    prepared.commit({ initial: true });
  } else { // before 2026.8: the gateway's startGatewaySidecars (src/gateway/server-startup-post-attach.ts) calls loadInternalHooks
    const loadInternalHooks = await regions.load(...seams.hooks);
    await waitFor(loadInternalHooks(config, workspace), "loading internal hooks");
  }
  memoryHook = await import(path.join(dist, "bundled/session-memory/handler.js"));
  const hooks = await import("openclaw/plugin-sdk/hook-runtime");
  for (const key of ["command", "session"]) {
    hooks.registerInternalHook(key, async (e) => {
      if (!scenario) return;
      activity++;
      await note(`openclaw internal hook ${e.type}:${e.action}`, { reason: String(e.context?.reason ?? e.context?.commandSource ?? "") });
    });
  }
  const [entry, name] = seams.inbound;
  const sdk = await import(entry);
  if (typeof sdk[name] !== "function") throw new Error(`OpenClaw moved ${name}: ${entry} no longer exports it`);
  if (name === "dispatchInboundDirectDmWithRuntime") { // a channel plugin passes its api.runtime (the recorder keeps it)
    const runtime = globalThis.__sgPluginRuntime;
    if (!runtime?.channel?.reply) throw new Error(`${name} needs a plugin runtime: the sg-recorder plugin was not registered with api.runtime.channel`);
    inbound = (params) => sdk[name]({ ...params, runtime });
  } else inbound = sdk[name];
  booted = Boolean(cfg);
}
async function waitFor(promise, what) {
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

// ---------- sessiongate config -> openclaw.json -------------------------------------------------
const CHAT_TYPES = { dm: "direct", group: "group", thread: "thread", channel: "group" };
const NEVER_MINUTES = 100 * 365 * 24 * 60; // "none" before 2026.8: an idle timeout no scenario reaches (100 years)
function policyOf(p) {
  // OpenClaw's modes (src/config/sessions/reset-policy.ts resolveSessionResetPolicy): none, daily,
  // idle; idleMinutes applies under daily too, which is sessiongate's `both`. Before 2026.8 there
  // is no `none` (src/config/zod-schema.session.ts SessionResetConfigSchema: daily | idle).
  if (p.mode === "none") return seamsOf(RELEASE).noneMode ? { mode: "none" } : { mode: "idle", idleMinutes: NEVER_MINUTES };
  if (p.mode === "idle") return { mode: "idle", idleMinutes: p.idle_minutes ?? 1440 };
  if (p.mode === "daily") return { mode: "daily", atHour: p.at_hour ?? 4 };
  return { mode: "daily", atHour: p.at_hour ?? 4, idleMinutes: p.idle_minutes ?? 1440 };
}
function writeConfig(agent, workspace, reset, byChannel, byType) {
  const port = server.address()?.port ?? 9;
  const cfg = {
    agents: { defaults: { model: { primary: "fake/echo" }, workspace, userTimezone: process.env.TZ || "UTC", skipBootstrap: true },
      ...(seamsOf(RELEASE).agentList ? { list: [{ id: agent, default: true, workspace }] } : { entries: { [agent]: { workspace } } }) }, // the only agent, so the one every message routes to
    models: { mode: "replace", providers: { fake: { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: "sk-fake", api: "openai-completions",
      models: [{ id: "echo", name: "Echo", reasoning: false, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096 }] } } },
    session: { dmScope: "per-channel-peer", reset, ...(Object.keys(byChannel).length ? { resetByChannel: byChannel } : {}), ...(Object.keys(byType).length ? { resetByType: byType } : {}) },
    hooks: { internal: { enabled: true, entries: { "session-memory": { enabled: true } } } },
    plugins: { allow: ["sg-recorder"], load: { paths: [path.join(HERE, "sg-recorder")] }, entries: { "sg-recorder": { enabled: true, hooks: { allowConversationAccess: true } } } },
  };
  fs.writeFileSync(process.env.OPENCLAW_CONFIG_PATH, JSON.stringify(cfg, null, 2));
  return cfg;
}

// ---------- the steps ----------------------------------------------------------------------------
// What OpenClaw cannot be driven through (docs/openclaw.md): no delegate child sessions on the
// inbound path, no store lock to inject, no per-message visibility, no minimum quiet before a daily
// reset, no memory providers of sessiongate's kind (so no backend to fail), no /resume; and every
// chat is a Telegram DM (the only channel bundled with 2026.9.6), so no policy per platform or chat type; and
// freshness is judged only when a message arrives (lazy for every chat), so no chat of its own can be eager.
const PROFILE_UNSUPPORTED = ["delegate", "delete_parent", "db_locked", "muted", "daily_min_idle_minutes", "providers",
  "backend_fail", "backend_slow", "/resume", "reset_by_platform", "reset_by_chat_type", "finalization_by_chat"];
async function start(req) {
  const agent = req.agent;
  if (!/^[a-z][a-z0-9-]*$/.test(agent ?? "")) throw new Error("start needs agent, the scenario's agent id (the Python side, conformance/adapters/openclaw, passes it)");
  const dir = path.join(process.env.SG_OC_STATE, "scenarios", agent);
  process.env.TZ = req.zone;
  clock.setSystemTime(req.now);
  const workspace = path.join(dir, "workspace");
  fs.mkdirSync(workspace, { recursive: true });
  const byChannel = Object.fromEntries(Object.entries(req.config.reset_by_platform ?? {}).map(([k, p]) => [k, policyOf(p)]));
  const byType = Object.fromEntries(Object.entries(req.config.reset_by_chat_type ?? {}).map(([k, p]) => [CHAT_TYPES[k] ?? k, policyOf(p)]));
  writeConfig(agent, workspace, policyOf(req.config.reset), byChannel, byType);
  resetConfig();
  const { getRuntimeConfig } = await import("openclaw/plugin-sdk/config-runtime");
  scenario = { agent, stateDir: process.env.OPENCLAW_STATE_DIR, workspace, cfg: getRuntimeConfig(), open: [], memorySeen: new Set(), ended: new Map(),
    rank: new Map(), keys: new Map(), resetRows: new Map() };
  if (req.resume) { // a respawn after a crash: what this process must know of the dead one's, from the store alone
    for (const file of fs.existsSync(path.join(workspace, "memory")) ? fs.readdirSync(path.join(workspace, "memory")) : []) scenario.memorySeen.add(file);
    for (const chat of req.resume.chats ?? []) scenario.keys.set(chat.name, sessionKeyOf(chat));
    if (fs.existsSync(ranksPath())) JSON.parse(fs.readFileSync(ranksPath(), "utf8")).forEach((id, i) => scenario.rank.set(id, i + 1));
    const store = readStore();
    for (const [id, segs] of store.segments) scenario.resetRows.set(id, segs.length - 1);
  }
  turnChat = new Map();
  heldRequests.length = 0;
}
const channelOf = () => "telegram"; // every chat, whatever its platform: the one channel OpenClaw bundles
/** The key OpenClaw routes a DM by (dmScope per-channel-peer; src/routing/session-key.ts). */
const sessionKeyOf = (chat) => `agent:${scenario.agent}:${channelOf(chat)}:direct:${chat.name.toLowerCase()}`;
function deliver(chat, text) {
  const turn = { chat: chat.name, text, done: false, asked: false };
  for (const tag of tagsOf(text)) turnChat.set(tag, chat.name);
  messageCount++;
  // OpenClaw drops a message id it has seen, and its dedupe outlives a process (it is in the
  // store): ids name the scenario's agent, the virtual instant and a count.
  const messageId = `${scenario.agent}:${tagsOf(text).join("") || text}:${Date.now()}:${messageCount}`;
  const channel = channelOf(chat);
  const promise = inbound({
    cfg: scenario.cfg, channel, channelLabel: channel, accountId: "default",
    peer: { kind: "direct", id: chat.name }, senderId: chat.name, senderAddress: `${channel}:${chat.name}`, recipientAddress: `${channel}:${chat.name}`,
    conversationLabel: chat.name, rawBody: text, messageId, timestamp: Date.now(), commandAuthorized: true,
    deliver: async (payload) => {
      activity++;
      if (process.env.SG_OC_DEBUG) log(`deliver to ${chat.name}: ${JSON.stringify(payload).slice(0, 400)}`);
      if (!payload?.text) return;
      await collectMemoryFiles(false);
      const session = labelOf(await currentSessionOf(chat.name));
      await call("platform.send_reply", { chat: chat.name, session, text: payload.text });
    },
    onRecordError: (e) => { activity++; log("record error:", String(e)); },
    onDispatchError: (e) => { activity++; log("dispatch error:", String(e)); },
  });
  promise.then((r) => { if (r?.route?.sessionKey) scenario.keys.set(chat.name, r.route.sessionKey); }, () => {});
  if (!scenario.keys.has(chat.name)) scenario.keys.set(chat.name, sessionKeyOf(chat));
  turn.promise = promise.then(() => { turn.done = true; activity++; }, (e) => { turn.done = true; turn.error = e; activity++; });
  scenario.open.push(turn);
}
/** A step is over when every turn is done, waiting for its model reply, or queued behind one. */
async function endStep(what) {
  // A turn neither done nor asking the model is still being worked on (OpenClaw's SQLite workers
  // take seconds of CPU the adapter cannot see), unless it queues behind a turn that is.
  const queued = (t) => scenario.open.some((o) => o !== t && o.asked && !o.done); // its chat's, or a full lane
  await settle(what, (quiet) => scenario.open.every((t) => t.done || t.asked || (queued(t) && quiet >= BLOCKED_MS)));
  await collectMemoryFiles();
  await askModel();
  await calls;
  const failed = scenario.open.find((t) => t.error);
  scenario.open = scenario.open.filter((t) => !t.done);
  if (failed) throw failed.error;
}

async function handle(req) {
  switch (req.op) {
    case "hello": await boot(); return { version: 2 };
    case "profile":
      return { finalization: "lazy", latency: 0, crash_durable: false, sweep_interval: 0,
        unsupported: [...PROFILE_UNSUPPORTED, ...(seamsOf(RELEASE).restartRecovery ? ["restart_after_cut_off_turn"] : [])] };
    case "start": await start(req); return null;
    case "deliver_message": deliver(req.chat, req.text); await endStep(`message ${req.text}`); return null;
    case "deliver_command": deliver(req.chat, req.command); await endStep(`command ${req.command}`); return null;
    case "deliver_reply": {
      const pending = pendingReplies.get(req.request);
      if (pending) {
        pendingReplies.delete(req.request);
        // Its turn is no longer waiting for the model: the step waits until OpenClaw has
        // delivered it (or asks the model again), however long a busy machine makes that.
        for (const turn of scenario.open) if (turn.chat === pending.chat && !turn.done) turn.asked = false;
        reply(pending.res, pending.request, req.text);
      }
      await endStep(`reply ${req.request}`);
      return null;
    }
    case "sigterm": { // the gateway's close runs its session-end drain first (src/gateway/server-close.ts); the Python side then kills the process
      await waitFor(drainForShutdown({ reason: "shutdown", totalTimeoutMs: 2000 }), "the shutdown session-end drain");
      await endStep("sigterm");
      return null;
    }
    case "restart": return null;
    case "delete_session_row": deleteSession(req.session); return null;
    case "durable_state": return durableState();
    case "resources": return { cached: [], running: 0 };
    case "reset": // the scenario is over; its agent's store stays until the process ends
      scenario = null;
      return null;
    default: throw new Error(`unknown op ${req.op}`);
  }
}
/** Another surface deletes a session: its rows in OpenClaw's store, as `openclaw sessions` would. */
function deleteSession(label) {
  const store = readStore();
  const id = store.ids.find((candidate) => (store.segments.get(candidate) ?? [[]]).some((_, segment) => labelOf({ id: candidate, segment }) === label));
  if (!id) return;
  if (!fs.existsSync(dbPath())) { // before 2026.8: the session's entry in sessions.json and its transcript files
    const index = path.join(legacyDir(), "sessions.json");
    if (fs.existsSync(index)) { // OpenClaw re-reads it when its size or mtime changes (src/config/sessions/store.ts readSessionStoreCache)
      const entries = JSON.parse(fs.readFileSync(index, "utf8"));
      for (const [key, entry] of Object.entries(entries)) if (entry?.sessionId === id) delete entries[key];
      fs.writeFileSync(`${index}.sg-tmp`, JSON.stringify(entries, null, 2));
      fs.renameSync(`${index}.sg-tmp`, index);
    }
    for (const file of fs.readdirSync(legacyDir())) if (file === `${id}.jsonl` || file.startsWith(`${id}.jsonl.reset.`)) fs.unlinkSync(path.join(legacyDir(), file));
    return;
  }
  const db = new DatabaseSync(dbPath());
  try {
    db.exec("pragma busy_timeout = 5000");
    for (const table of ["transcript_events", "session_windows"]) db.prepare(`delete from ${table} where session_id = ?`).run(id);
    db.prepare("delete from session_nodes where current_session_id = ?").run(id);
  } finally { db.close(); }
}

for (;;) {
  const req = await nextLine();
  inRequest = true;
  try {
    if (typeof req.now === "number" && scenario) await advanceTo(req.now);
    const value = await handle(req);
    await calls;
    inRequest = false;
    send({ done: true, value: value ?? null });
  } catch (err) {
    await calls;
    inRequest = false;
    send({ fail: { message: String(err?.message ?? err), traceback: String(err?.stack ?? "").split("\n").slice(1, 9).map((s) => s.trim()) } });
  }
}
