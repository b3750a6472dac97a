// sessiongate's OpenClaw adapter (gateway.mjs runs it): the fake model, an OpenAI-compatible streaming server on 127.0.0.1.
import http from "node:http";
import { collectMemoryFiles } from "./hooks.mjs";
import { log, oc } from "./state.mjs";
import { currentSessionOf, labelOf, tagsOf, textOf } from "./store.mjs";
import { call, io } from "./wire.mjs";

// ---------- the fake model ------------------------------------------------------------------
export const pendingReplies = new Map(); // sessiongate request id -> http response
export const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (chunk) => { body += chunk; });
  req.on("end", async () => {
    io.activity++;
    let request = {};
    try { request = JSON.parse(body); } catch { /* an empty body asks nothing */ }
    // OpenClaw appends its internal context as a user message of its own after the user's.
    const messages = (request.messages || []).filter((m) => m.role === "user" || m.role === "assistant").map(textOf)
      .filter((text) => !text.startsWith("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"));
    const last = messages.at(-1) ?? "";
    const tag = tagsOf(last).at(-1);
    const chat = tag ? oc.turnChat.get(tag) : undefined;
    if (process.env.SG_OC_DEBUG) log(`model request at ${new Date().toISOString()}: tag=${tag} chat=${chat} body=${JSON.stringify(request.messages?.slice(1))}`);
    if (!chat || !oc.scenario) { // not a conversation turn (a slug or title request): answer it at once
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
    for (const turn of oc.scenario.open) if (turn.chat === chat && !turn.done) turn.asked = true;
  });
});
export const heldRequests = [];
/** The model requests held in this step, to the harness in chat order (then arrival order). */
export async function askModel() {
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
export function reply(res, request, text) {
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
