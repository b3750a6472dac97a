// A deliberately naive gateway in Node, to show the wire protocol (docs/protocol.md) is language-neutral.
// One session per chat, never ended, nothing persisted: it runs end to end and fails checks.
//   sessiongate run --gateway exec:"node examples/echo-gateway.js"
"use strict";
const readline = require("node:readline");

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const next = async () => {
  const { value, done } = await lines.next();
  if (done) process.exit(0); // the harness closed our stdin
  return JSON.parse(value);
};
// Ask the harness to do something (LLM, platform, memory); its answer is the next line.
const call = async (name, args) => {
  send({ call: name, args });
  const answer = await next();
  if ("error" in answer) throw new Error(`${name}: ${answer.error}`);
  return answer.result;
};

const sessions = new Map(); // chat name -> {id, messages: [[role, content, visibility]]}
let version = 1; // the protocol version agreed at hello: 2 has crash points
const pending = new Map(); // LLM request id -> {chat, session, user}

async function handle(req) {
  switch (req.op) {
    case "hello":
      version = req.version >= 2 ? 2 : 1;
      return { version };
    case "profile": // v2: the places a crash_at may kill this process mid-step
      return { finalization: "lazy", latency: 0, crash_durable: false, sweep_interval: 0, unsupported: [],
               ...(version >= 2 ? { crash_points: ["before-sync"] } : {}) };
    case "deliver_message": {
      const chat = req.chat.name;
      if (!sessions.has(chat)) sessions.set(chat, { id: `echo-${chat}`, messages: [] });
      const session = sessions.get(chat);
      session.messages.push(["user", req.text, "visible"]);
      const id = await call("llm.request", { chat, session: session.id, prompt: [req.text] });
      pending.set(id, { chat, session, user: req.text });
      return null;
    }
    case "deliver_reply": {
      const turn = pending.get(req.request);
      if (!turn) return null;
      pending.delete(req.request);
      turn.session.messages.push(["assistant", req.text, "visible"]);
      await call("platform.send_reply", { chat: turn.chat, session: turn.session.id, text: req.text });
      // The reply is out, the memory sync not yet (the harness's own point `reply-sent` is here
      // too): if the harness answers 'crashed', `call` throws and the step ends (as `fail`): the
      // process is dead from here on.
      if (version >= 2) await call("crash_point", { point: "before-sync" });
      await call("recorder.sync_turn", { session: turn.session.id, user: turn.user, assistant: req.text });
      return null;
    }
    case "durable_state":
      return {
        sessions: [...sessions.values()].map((s) => ({ id: s.id, parent: null, messages: s.messages })),
        routing: [...sessions.entries()].map(([chat, s]) => [chat, s.id]).sort(),
      };
    case "resources":
      return { cached: [], running: 0 };
    default: // start, commands, sigterm, crash, restart, faults: accepted and ignored
      return null;
  }
}

(async () => {
  for (;;) {
    const req = await next();
    try {
      send({ done: true, value: await handle(req) });
    } catch (err) {
      send({ fail: { message: String(err), traceback: [] } });
    }
  }
})();
