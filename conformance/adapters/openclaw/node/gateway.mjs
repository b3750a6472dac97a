// sessiongate's OpenClaw adapter: an `exec:` gateway (docs/protocol.md, v2) that boots OpenClaw's
// real code once per process and drives it per scenario, each in a fresh state dir. Run as
//   node --import ./clock.mjs gateway.mjs      (env: SG_OC_ROOT, SG_OC_MEMORY; see docs/openclaw.md)
// Messages go through OpenClaw's own inbound path (plugin-sdk channel-inbound
// dispatchInboundDirectDm, as a DM); the model is a fake OpenAI-compatible streaming server on
// 127.0.0.1 whose answers are sessiongate's LLM replies; hooks come from a recorder plugin
// (sg-recorder/) and the bundled session-memory hook; the durable state is read from OpenClaw's
// own SQLite store. The Python side (conformance/adapters/openclaw) kills and respawns this
// process on a crash, on the same state dir.
// Modules by concern: state.mjs (what they share), wire.mjs (the protocol), virtual-time.mjs (the
// clock and when a step is over), model.mjs (the fake model), store.mjs (OpenClaw's store),
// hooks.mjs (its hooks), boot.mjs (its boot and config); this one takes the steps.
import fs from "node:fs";
import path from "node:path";
import { CHAT_TYPES, RELEASE, boot, defaultPolicy, policyOf, seamsOf, writeConfig } from "./boot.mjs";
import { collectMemoryFiles } from "./hooks.mjs";
import { askModel, heldRequests, pendingReplies, reply } from "./model.mjs";
import { BLOCKED_MS, clock, log, oc } from "./state.mjs";
import { currentSessionOf, deleteSession, durableState, labelOf, ranksPath, readStore, tagsOf } from "./store.mjs";
import { advanceTo, settle, waitFor } from "./virtual-time.mjs";
import { call, io, nextLine, send } from "./wire.mjs";

let messageCount = 0;
// ---------- the steps ----------------------------------------------------------------------------
// What OpenClaw cannot be driven through (docs/openclaw.md): no delegate child sessions on the
// inbound path, no store lock to inject, no per-message visibility, no minimum quiet before a daily
// reset, no memory providers of sessiongate's kind (so no backend to fail), no /resume; and every
// chat is a Telegram DM (the only channel bundled with 2026.9.6), so no policy per platform or chat type; and
// freshness is judged only when a message arrives (lazy for every chat), so no chat of its own can be eager.
const PROFILE_UNSUPPORTED = ["delegate", "delete_parent", "db_locked", "muted", "daily_min_idle_minutes", "providers",
  "backend_fail", "backend_slow", "/resume", "reset_by_platform", "reset_by_chat_type", "finalization_by_chat",
  "shared_chat_ids"];
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
  const leftToOpenClaw = req.config.reset === "default"; // no session.reset: OpenClaw's own default applies
  writeConfig(agent, workspace, leftToOpenClaw ? undefined : policyOf(req.config.reset), byChannel, byType);
  oc.resetConfig();
  const { getRuntimeConfig } = await import("openclaw/plugin-sdk/config-runtime");
  if (leftToOpenClaw) { // the policy the profile reported must be the one OpenClaw resolves from the config it read
    const inForce = defaultPolicy(getRuntimeConfig().session ?? {}), reported = defaultPolicy();
    if (JSON.stringify(inForce) !== JSON.stringify(reported)) throw new Error(`OpenClaw applies ${JSON.stringify(inForce)} by default, not the ${JSON.stringify(reported)} its profile reported`);
  }
  oc.scenario = { agent, stateDir: process.env.OPENCLAW_STATE_DIR, workspace, cfg: getRuntimeConfig(), open: [], memorySeen: new Set(), ended: new Map(),
    rank: new Map(), keys: new Map(), resetRows: new Map(), segmentOf: new Map(), sessionOf: new Map() };
  if (req.resume) { // a respawn after a crash: what this process must know of the dead one's, from the store alone
    for (const file of fs.existsSync(path.join(workspace, "memory")) ? fs.readdirSync(path.join(workspace, "memory")) : []) oc.scenario.memorySeen.add(file);
    for (const chat of req.resume.chats ?? []) oc.scenario.keys.set(chat.name, sessionKeyOf(chat));
    if (fs.existsSync(ranksPath())) JSON.parse(fs.readFileSync(ranksPath(), "utf8")).forEach((id, i) => oc.scenario.rank.set(id, i + 1));
    const store = readStore();
    for (const [id, segs] of store.segments) { oc.scenario.resetRows.set(id, segs.length - 1); oc.scenario.segmentOf.set(id, segs.length - 1); }
  }
  oc.turnChat = new Map();
  heldRequests.length = 0;
}
const channelOf = () => "telegram"; // every chat, whatever its platform: the one channel OpenClaw bundles
/** The key OpenClaw routes a DM by (dmScope per-channel-peer; src/routing/session-key.ts). */
const sessionKeyOf = (chat) => `agent:${oc.scenario.agent}:${channelOf(chat)}:direct:${chat.name.toLowerCase()}`;
// OpenClaw's refusal of a turn whose session rotated while it waited to start (a queued /new ran
// first), or whose session entry was deleted meanwhile (a `delete_session`): `admitReplyTurn`
// (src/auto-reply/reply/reply-turn-admission.ts) throws a plain Error with one of these messages
// (`resolveSessionWorkStartError`, src/config/sessions/lifecycle.ts, words them alike).
const WORK_START_REFUSAL = /^Session ".+" (changed|was deleted) while starting work\. Retry\.$/;
// What OpenClaw's Telegram channel sends for a dispatch that failed before its answer was delivered
// (extensions/telegram/src/bot-message-dispatch.ts; bot-message.ts sends the same for a throw).
const CHANNEL_FAILURE_TEXT = "Something went wrong while processing your request. Please try again.";
/** The refused turn, handled as the Telegram channel handles a live update's dispatch error
 * (bot-message-dispatch.ts `dispatchError`): the chat is sent CHANNEL_FAILURE_TEXT unless an
 * answer was already delivered, and nothing is retried (`retryDispatchErrors` is only for spooled
 * replays; bot-core.ts marks a live update completed). Any other rejection stays the adapter's failure. */
async function refusedAsTheChannelDoes(turn, chat, error) {
  if (!WORK_START_REFUSAL.test(String(error?.message ?? ""))) return false;
  log(`turn of ${chat.name} refused by OpenClaw (${error.message}): sent the Telegram channel's failure reply`);
  if (!turn.answered) {
    const session = labelOf(await currentSessionOf(chat.name));
    await call("platform.send_reply", { chat: chat.name, session, text: CHANNEL_FAILURE_TEXT });
  }
  return true;
}
function deliver(chat, text) {
  const turn = { chat: chat.name, text, done: false, asked: false, answered: false };
  for (const tag of tagsOf(text)) oc.turnChat.set(tag, chat.name);
  messageCount++;
  // OpenClaw drops a message id it has seen, and its dedupe outlives a process (it is in the
  // store): ids name the scenario's agent, the virtual instant and a count.
  const messageId = `${oc.scenario.agent}:${tagsOf(text).join("") || text}:${Date.now()}:${messageCount}`;
  const channel = channelOf(chat);
  const promise = oc.inbound({
    cfg: oc.scenario.cfg, channel, channelLabel: channel, accountId: "default",
    peer: { kind: "direct", id: chat.name }, senderId: chat.name, senderAddress: `${channel}:${chat.name}`, recipientAddress: `${channel}:${chat.name}`,
    conversationLabel: chat.name, rawBody: text, messageId, timestamp: Date.now(), commandAuthorized: true,
    deliver: async (payload) => {
      io.activity++;
      if (process.env.SG_OC_DEBUG) log(`deliver to ${chat.name}: ${JSON.stringify(payload).slice(0, 400)}`);
      if (!payload?.text) return;
      turn.answered = true;
      await collectMemoryFiles(false);
      const session = labelOf(await currentSessionOf(chat.name));
      await call("platform.send_reply", { chat: chat.name, session, text: payload.text });
    },
    onRecordError: (e) => { io.activity++; log("record error:", String(e)); },
    onDispatchError: (e) => { io.activity++; log("dispatch error:", String(e)); },
  });
  promise.then((r) => { if (r?.route?.sessionKey) oc.scenario.keys.set(chat.name, r.route.sessionKey); }, () => {});
  if (!oc.scenario.keys.has(chat.name)) oc.scenario.keys.set(chat.name, sessionKeyOf(chat));
  turn.promise = promise.then(() => { turn.done = true; io.activity++; }, async (e) => {
    io.activity++;
    try { if (!await refusedAsTheChannelDoes(turn, chat, e)) turn.error = e; } catch (sendError) { turn.error = sendError; }
    turn.done = true; io.activity++;
  });
  oc.scenario.open.push(turn);
}
/** A step is over when every turn is done, waiting for its model reply, or queued behind one. */
async function endStep(what) {
  // A turn neither done nor asking the model is still being worked on (OpenClaw's SQLite workers
  // take seconds of CPU the adapter cannot see), unless it queues behind a turn that is.
  const queued = (t) => oc.scenario.open.some((o) => o !== t && o.asked && !o.done); // its chat's, or a full lane
  await settle(what, (quiet) => oc.scenario.open.every((t) => t.done || t.asked || (queued(t) && quiet >= BLOCKED_MS)));
  await collectMemoryFiles();
  await askModel();
  await io.calls;
  const failed = oc.scenario.open.find((t) => t.error);
  oc.scenario.open = oc.scenario.open.filter((t) => !t.done);
  if (failed) throw failed.error;
}

async function handle(req) {
  switch (req.op) {
    case "hello": await boot(); return { version: 2 };
    case "profile":
      return { finalization: "lazy", latency: 0, crash_durable: false, sweep_interval: 0,
        ...(req.config?.reset === "default" ? { reset_default: defaultPolicy() } : {}),
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
        // A chat waits for the model while any request of it is out: the reply to an abandoned
        // turn's request (a /stop) leaves the next turn's own request waiting (catalog 121).
        const stillAsking = [...pendingReplies.values()].some((p) => p.chat === pending.chat);
        if (!stillAsking) for (const turn of oc.scenario.open) if (turn.chat === pending.chat && !turn.done) turn.asked = false;
        reply(pending.res, pending.request, req.text);
      }
      await endStep(`reply ${req.request}`);
      return null;
    }
    case "sigterm": { // the gateway's close runs its session-end drain first (src/gateway/server-close.ts); the Python side then kills the process
      await waitFor(oc.drainForShutdown({ reason: "shutdown", totalTimeoutMs: 2000 }), "the shutdown session-end drain");
      await endStep("sigterm");
      return null;
    }
    case "restart": return null;
    case "delete_session_row": deleteSession(req.session); return null;
    case "durable_state": return durableState();
    case "resources": return { cached: [], running: 0 };
    case "reset": // the scenario is over; its agent's store stays until the process ends
      oc.scenario = null;
      return null;
    default: throw new Error(`unknown op ${req.op}`);
  }
}
for (;;) {
  const req = await nextLine();
  io.inRequest = true;
  try {
    if (typeof req.now === "number" && oc.scenario) await advanceTo(req.now);
    const value = await handle(req);
    await io.calls;
    io.inRequest = false;
    send({ done: true, value: value ?? null });
  } catch (err) {
    await io.calls;
    io.inRequest = false;
    send({ fail: { message: String(err?.message ?? err), traceback: String(err?.stack ?? "").split("\n").slice(1, 9).map((s) => s.trim()) } });
  }
}
