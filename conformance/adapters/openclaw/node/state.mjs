// sessiongate's OpenClaw adapter: what its modules share (gateway.mjs runs it; docs/openclaw.md).
// The clock comes from the preload (clock.mjs); the rest is set at boot (boot.mjs) and per scenario (gateway.mjs).
export const clock = globalThis.__sgClock;
export const real = globalThis.__sgReal;
if (!clock) throw new Error("gateway.mjs needs the virtual clock: run it as node --import ./clock.mjs gateway.mjs");
export const ROOT = process.env.SG_OC_ROOT; // the install: ROOT/node_modules/openclaw
export const MEMORY = process.env.SG_OC_MEMORY || "session-memory"; // which hook is on_session_end: session-memory | before-reset
export const STEP_WALL_MS = Number(process.env.SG_OC_STEP_WALL_MS || 300000);
export const QUIET_MS = Number(process.env.SG_OC_QUIET_MS || 250); // wall time with no OpenClaw activity that ends a step
export const BLOCKED_MS = Number(process.env.SG_OC_BLOCKED_MS || 3000); // a dispatch neither done nor asking the model this long is queued
export const log = (...a) => {
  const line = `[sg-openclaw] ${a.join(" ")}\n`;
  process.stderr.write(line);
};
/** The scenario being run ({agent, stateDir, workspace, cfg, open, memorySeen, ended, rank, keys, resetRows, segmentOf, sessionOf}, null
 * between scenarios), its turn tags (tag -> chat name, from deliver_message), and what boot found in OpenClaw. */
export const oc = { scenario: null, turnChat: new Map(), inbound: null, memoryHook: null, resetConfig: null, drainForShutdown: null, booted: false };
export const agentDb = {}; // ifOpen: OpenClaw's open handle on an agent's store (2026.8 and later), set at boot
