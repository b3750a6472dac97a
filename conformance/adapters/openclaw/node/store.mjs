// sessiongate's OpenClaw adapter (gateway.mjs runs it): OpenClaw's store, read and written as another surface would.
import fs from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import zlib from "node:zlib";
import { agentDb, oc } from "./state.mjs";

export const textOf = (m) => (typeof m?.content === "string" ? m.content : (m?.content || []).map((p) => p.text || "").join(""));
export const tagsOf = (text) => text.match(/\[t\d+\]/g) || [];

// ---------- sessions: OpenClaw's id, split at its reset rows ---------------------------------
// Since 2026.8.1 a reset keeps the session id and appends a `reset` transcript row: a sessiongate
// session is one segment between resets, named `ocN` (N: the id's rank by its session_windows
// row, so names are the same in every run) and `ocN.K` for its K-th segment.
// Each scenario is an OpenClaw agent of its own (agents.list, `default: true`), with its own
// workspace and store under the process's state dir: OpenClaw cannot move its state dir in a
// running process (its shared state database and leases stay bound to the first one).
export const dbPath = () => path.join(oc.scenario.stateDir, `agents/${oc.scenario.agent}/agent/openclaw-agent.sqlite`);
const legacyDir = () => path.join(oc.scenario.stateDir, `agents/${oc.scenario.agent}/sessions`);
export function readStore() {
  const store = { ids: [], segments: new Map(), routing: [] }; // segments: id -> [[role, content]...] per segment
  if (fs.existsSync(dbPath())) {
    // OpenClaw's own open handle when it has one: a second connection's sidecars trip its WAL
    // split-brain guard (src/infra/sqlite-wal-split-brain.ts), which SIGKILLs the process.
    const own = agentDb.ifOpen?.({ agentId: oc.scenario.agent, env: process.env })?.db;
    const db = own ?? new DatabaseSync(dbPath(), { readOnly: true });
    try {
      const tables = new Set(db.prepare("select name from sqlite_master where type = 'table'").all().map((r) => r.name));
      if (tables.has("session_windows")) store.ids = db.prepare("select session_id from session_windows order by rowid").all().map((r) => r.session_id);
      if (tables.has("transcript_events")) {
        // A large event is kept compressed (event_json NULL, event_zstd set: the table's CHECK; OpenClaw
        // compresses where the runtime has zstd, src/infra/zstd-codec.ts, as its bundled Node 24 has).
        const zstd = db.prepare("select name from pragma_table_info('transcript_events') where name = 'event_zstd'").all().length > 0;
        for (const row of db.prepare(`select session_id, event_json${zstd ? ", event_zstd" : ""} from transcript_events order by session_id, seq`).all()) {
          if (!store.segments.has(row.session_id)) store.segments.set(row.session_id, [[]]);
          const segs = store.segments.get(row.session_id);
          const event = JSON.parse(row.event_json ?? zlib.zstdDecompressSync(row.event_zstd).toString("utf8"));
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
  for (const id of store.ids) if (!oc.scenario.rank.has(id)) rankId(id);
  return store;
}
/** Name the next OpenClaw session id `oc<N>`. The names are the adapter's bookkeeping and outlive a
 * respawn (kept beside the scenario's workspace): a session deleted before a crash or a stop is
 * gone from the store, and ranking the survivors again would rename them. */
function rankId(id) {
  oc.scenario.rank.set(id, oc.scenario.rank.size + 1);
  fs.writeFileSync(ranksPath(), JSON.stringify([...oc.scenario.rank.keys()]));
}
export const ranksPath = () => path.join(path.dirname(oc.scenario.workspace), "sg-session-names.json");
export const labelOf = ({ id, segment }) => {
  if (!oc.scenario.rank.has(id)) rankId(id);
  return `oc${oc.scenario.rank.get(id)}${segment ? `.${segment + 1}` : ""}`;
};
/** The session's segment now; once its rows are deleted (another surface's `delete_session`), the
 * last one seen while they were there: a hook of a turn in flight then names the segment it ran in
 * (2026.9.6's seed 16 named oc1 for a turn of oc1.2). */
export function currentSegment(id) {
  const segs = readStore().segments.get(id);
  if (!segs) return oc.scenario.segmentOf.get(id) ?? 0;
  oc.scenario.segmentOf.set(id, segs.length - 1);
  return segs.length - 1;
}
/** The chat's session now; once its routing row is deleted, the last one it had: OpenClaw still
 * delivers to the chat (its error reply for a turn whose session went mid-turn), so the reply is
 * sent, under the session the chat was in. */
export async function currentSessionOf(chat) {
  const key = oc.scenario.keys.get(chat);
  const node = readStore().routing.find((r) => r.session_key === key);
  if (!node) {
    const last = oc.scenario.sessionOf.get(chat);
    if (last) return last;
    throw new Error(`OpenClaw's store routes no session for ${chat} (${key})`);
  }
  const session = { id: node.current_session_id, segment: currentSegment(node.current_session_id) };
  oc.scenario.sessionOf.set(chat, session);
  return session;
}
export function durableState() {
  if (!oc.scenario) return { sessions: [], routing: [] };
  const store = readStore();
  const sessions = [];
  for (const id of store.ids) {
    const segs = store.segments.get(id) ?? [[]];
    segs.forEach((messages, segment) => sessions.push({ id: labelOf({ id, segment }), parent: null, messages: messages.map(([role, content]) => [role, content, "visible"]) }));
  }
  const chats = new Map([...oc.scenario.keys].map(([chat, key]) => [key, chat]));
  const routing = store.routing.filter((r) => chats.has(r.session_key))
    .map((r) => [chats.get(r.session_key), labelOf({ id: r.current_session_id, segment: (store.segments.get(r.current_session_id) ?? [[]]).length - 1 })]);
  return { sessions, routing };
}

/** Another surface deletes a session: its rows in OpenClaw's store, as `openclaw sessions` would. */
export function deleteSession(label) {
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
