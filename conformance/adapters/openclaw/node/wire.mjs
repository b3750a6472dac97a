// sessiongate's OpenClaw adapter (gateway.mjs runs it): the wire (protocol lines on stdin and stdout, docs/protocol.md v2).
import readline from "node:readline";
import { log } from "./state.mjs";

// ---------- the wire ----------------------------------------------------------------------
const inbox = [];
let wake = null;
readline.createInterface({ input: process.stdin }).on("line", (line) => { inbox.push(line); wake?.(); }).on("close", () => process.exit(0));
export async function nextLine() {
  while (!inbox.length) await new Promise((resolve) => { wake = resolve; });
  wake = null;
  return JSON.parse(inbox.shift());
}
export const send = (message) => globalThis.__sgProtocolWrite(JSON.stringify(message) + "\n");
/** What a step shares: inside a request, the harness calls in flight, and a count bumped by everything
 * OpenClaw does that the adapter sees (it ends a quiet period). */
export const io = { inRequest: false, calls: Promise.resolve(), activity: 0 };
/** A call on the harness, answered before anything else is written; serialized, only inside a request. */
export function call(name, args) {
  io.activity++;
  const made = io.calls.then(async () => {
    if (!io.inRequest) throw new Error(`OpenClaw made ${name} between sessiongate requests (after its step was over)`);
    send({ call: name, args });
    const answer = await nextLine();
    if ("error" in answer) throw Object.assign(new Error(`${name}: ${answer.error}`), { answer });
    return answer.result;
  });
  io.calls = made.catch(() => {});
  return made;
}
export const note = (what, detail) => call("note", detail ? { what, detail } : { what }).catch((e) => log("note failed:", e.message));
