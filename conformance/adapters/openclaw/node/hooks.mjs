// sessiongate's OpenClaw adapter (gateway.mjs runs it): OpenClaw's hooks (the sg-recorder plugin, session-memory's files) as the harness's.
import fs from "node:fs";
import path from "node:path";
import { MEMORY, log, oc } from "./state.mjs";
import { currentSegment, labelOf, readStore, tagsOf, textOf } from "./store.mjs";
import { call, io, note } from "./wire.mjs";

// ---------- hooks -----------------------------------------------------------------------------
globalThis.__sgHook = async (name, event, ctx) => {
  if (!oc.scenario) return;
  io.activity++;
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
    oc.scenario.ended.set(id, ended);
    await collectMemoryFiles(false); // a memory file already written ended the session before this hook
    await call("hooks.on_session_finalize", { session: labelOf(ended), reason: String(event.reason ?? "unknown") });
  } else if (name === "before_reset") {
    await note("openclaw before_reset", { session: labelOf(oc.scenario.ended.get(id) ?? endedSegment(id)), reason: String(event.reason ?? "") });
    if (MEMORY === "before-reset") {
      const transcript = (event.messages || []).filter((m) => m.role === "user" || m.role === "assistant").map((m) => [m.role, textOf(m)]);
      await call("recorder.on_session_end", { session: labelOf(oc.scenario.ended.get(id) ?? endedSegment(id)), transcript });
    }
  } else if (name === "session_start") {
    await collectMemoryFiles(false);
    await note("openclaw session_start", { session: labelOf({ id, segment: currentSegment(id) }) });
  }
};
/** The segment a reset ended: the last but one if OpenClaw already wrote the reset row, else the last. */
function endedSegment(id) {
  const segs = readStore().segments.get(id);
  const marked = oc.scenario.resetRows.get(id) ?? 0;
  if (!segs) return { id, segment: marked }; // its rows were deleted: the segment it was in when they went
  const last = segs.length - 1;
  oc.scenario.resetRows.set(id, last);
  return { id, segment: last > marked ? last - 1 : last };
}
/** session-memory's artifacts: each file it wrote since the last step is one on_session_end. */
export async function collectMemoryFiles(flush = true) {
  if (MEMORY !== "session-memory" || !oc.scenario) return;
  if (flush) await oc.memoryHook?.flushSessionMemoryWritesForTest?.();
  const dir = path.join(oc.scenario.workspace, "memory");
  if (!fs.existsSync(dir)) return;
  for (const file of fs.readdirSync(dir).sort()) {
    // Only session-memory's own files (<date>-<slug>.md): its write stages a hidden `.<name>.<uuid>.*.tmp`
    // beside the file and renames it into place (@openclaw/fs-safe), and that temp file, read before
    // the rename on a busy machine, was one memory save reported twice (2026.8.2's 22–24, under load).
    if (file.startsWith(".") || !file.endsWith(".md")) {
      if (process.env.SG_OC_DEBUG) log(`memory dir: not a memory file, skipped: ${file}`);
      continue;
    }
    if (oc.scenario.memorySeen.has(file)) continue;
    oc.scenario.memorySeen.add(file);
    const text = fs.readFileSync(path.join(dir, file), "utf8");
    const id = text.match(/\*\*Session ID\*\*: (\S+)/)?.[1];
    const transcript = [...text.matchAll(/^(user|assistant): (.*)$/gm)].map((m) => [m[1], unquote(m[2])]);
    if (!id) { await note("openclaw memory file without a session id", { file }); continue; }
    await call("recorder.on_session_end", { session: labelOf(oc.scenario.ended.get(id) ?? { id, segment: currentSegment(id) }), transcript });
  }
}
const unquote = (s) => { try { return JSON.parse(s); } catch { return s; } };
