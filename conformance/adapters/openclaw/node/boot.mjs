// sessiongate's OpenClaw adapter (gateway.mjs runs it): OpenClaw's boot (once per process), its seams per release, and openclaw.json.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { server } from "./model.mjs";
import { Regions } from "./regions.mjs";
import { ROOT, agentDb, oc } from "./state.mjs";
import { waitFor } from "./virtual-time.mjs";
import { io, note } from "./wire.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
// ---------- boot (once per process) -----------------------------------------------------------
// Where the functions the adapter calls live, by release (source file, function): OpenClaw moves
// them. A release not listed takes the newest layout and fails at boot naming what moved.
export const RELEASE = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/openclaw/package.json"), "utf8")).version;
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
  // The last 2026.8.x: 2026.9.6's store, lanes, drain, plugins, inbound, config and restart-recovery
  // claims (each read from its dist), but internal hooks still registered by loadInternalHooks, as
  // its startGatewaySidecars (src/gateway/server-startup-post-attach.ts) calls it: no prepareInternalHooks.
  "2026.8.2": {
    agentDbIfOpen: ["src/state/openclaw-agent-db.ts", "getOpenClawAgentDatabaseIfOpen"],
    resolveLanes: true,
    drain: ["src/gateway/active-sessions-shutdown-drain.ts", "drainActiveSessionsForShutdown"],
    plugins: ["src/plugins/loader.ts", "loadAndActivateRootPluginRegistry"],
    hooks: ["src/hooks/loader.ts", "loadInternalHooks"],
    inbound: ["openclaw/plugin-sdk/channel-inbound", "dispatchInboundDirectDm"],
    noneMode: true, // src/config/zod-schema.session.ts: none | daily | idle
    agentList: false, // src/config/zod-schema.agents.ts: agents.entries
    restartRecovery: true, // src/auto-reply/reply/restart-recovery-claim.ts, as 2026.9.6
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
export const seamsOf = (release) => SEAMS[release] ?? SEAMS["2026.9.6"];
export async function boot() {
  if (oc.booted) return;
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
  oc.resetConfig = await regions.load("src/config/runtime-snapshot.ts", "resetConfigRuntimeState");
  oc.resolveResetPolicy = await regions.load("src/config/sessions/reset-policy.ts", "resolveSessionResetPolicy");
  const { getRuntimeConfig } = await import("openclaw/plugin-sdk/config-runtime");
  const config = getRuntimeConfig();
  // The gateway's own start-up sizes its command lanes from the config (maxConcurrent): without
  // it the main lane runs one agent turn at a time, process-wide.
  const applyLanes = await regions.load("src/gateway/server-lanes.ts", "applyGatewayLaneConcurrency");
  if (seams.resolveLanes) applyLanes((await regions.load("src/gateway/server-lanes.ts", "resolveGatewayLaneConcurrency"))(config), { gatewayStart: true });
  else applyLanes(config);
  oc.drainForShutdown = await regions.load(...seams.drain);
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
  oc.memoryHook = await import(path.join(dist, "bundled/session-memory/handler.js"));
  const hooks = await import("openclaw/plugin-sdk/hook-runtime");
  for (const key of ["command", "session"]) {
    hooks.registerInternalHook(key, async (e) => {
      if (!oc.scenario) return;
      io.activity++;
      await note(`openclaw internal hook ${e.type}:${e.action}`, { reason: String(e.context?.reason ?? e.context?.commandSource ?? "") });
    });
  }
  const [entry, name] = seams.inbound;
  const sdk = await import(entry);
  if (typeof sdk[name] !== "function") throw new Error(`OpenClaw moved ${name}: ${entry} no longer exports it`);
  if (name === "dispatchInboundDirectDmWithRuntime") { // a channel plugin passes its api.runtime (the recorder keeps it)
    const runtime = globalThis.__sgPluginRuntime;
    if (!runtime?.channel?.reply) throw new Error(`${name} needs a plugin runtime: the sg-recorder plugin was not registered with api.runtime.channel`);
    oc.inbound = (params) => sdk[name]({ ...params, runtime });
  } else oc.inbound = sdk[name];
  oc.booted = Boolean(cfg);
}
// ---------- sessiongate config -> openclaw.json -------------------------------------------------
export const CHAT_TYPES = { dm: "direct", group: "group", thread: "thread", channel: "group" };
const NEVER_MINUTES = 100 * 365 * 24 * 60; // "none" before 2026.8: an idle timeout no scenario reaches (100 years)
export function policyOf(p) {
  // OpenClaw's modes (src/config/sessions/reset-policy.ts resolveSessionResetPolicy): none, daily,
  // idle; idleMinutes applies under daily too, which is sessiongate's `both`. Before 2026.8 there
  // is no `none` (src/config/zod-schema.session.ts SessionResetConfigSchema: daily | idle).
  if (p.mode === "none") return seamsOf(RELEASE).noneMode ? { mode: "none" } : { mode: "idle", idleMinutes: NEVER_MINUTES };
  if (p.mode === "idle") return { mode: "idle", idleMinutes: p.idle_minutes ?? 1440 };
  if (p.mode === "daily") return { mode: "daily", atHour: p.at_hour ?? 4 };
  return { mode: "daily", atHour: p.at_hour ?? 4, idleMinutes: p.idle_minutes ?? 1440 };
}
/** The policy OpenClaw applies to a DM when openclaw.json gives none (`reset: default`), in
 * sessiongate's terms: resolveSessionResetPolicy (src/config/sessions/reset-policy.ts) with no
 * session config, whose DEFAULT_RESET_MODE is "none" since 2026.8 and "daily" (at 4) before. */
export function defaultPolicy(sessionCfg = {}) {
  const p = oc.resolveResetPolicy({ sessionCfg, resetType: "direct" });
  const idle = p.idleMinutes > 0 ? p.idleMinutes : null; // 0 or unset: no idle expiry
  const mode = p.mode === "none" || (p.mode === "idle" && idle === null) ? "none"
    : p.mode === "idle" ? "idle" : idle === null ? "daily" : "both";
  return { mode, idle_minutes: idle ?? 1440, at_hour: p.atHour ?? 4, daily_min_idle_minutes: 0 };
}
export function writeConfig(agent, workspace, reset, byChannel, byType) {
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
