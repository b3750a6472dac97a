// An OpenClaw plugin that hands every lifecycle hook it sees to sessiongate's adapter (gateway.mjs),
// through a function the adapter puts on globalThis before it loads plugins.
import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";

const HOOKS = ["session_start", "session_end", "before_reset", "agent_end"];
export default definePluginEntry({
  id: "sg-recorder",
  name: "sessiongate recorder",
  description: "hands lifecycle hooks to sessiongate",
  register(api) {
    globalThis.__sgPluginRuntime = api.runtime; // what a channel plugin passes to the SDK's inbound path (releases before 2026.8)
    for (const name of HOOKS) {
      api.on(name, async (event, ctx) => {
        await globalThis.__sgHook?.(name, event ?? {}, ctx ?? {});
      });
    }
  },
});
