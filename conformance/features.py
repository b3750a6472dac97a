"""What `Profile.unsupported` may name (event kinds, settings, commands), and which a scenario uses."""

from __future__ import annotations

from sim.kinds import KINDS
from sim.scenario import BEFORE_TIMERS, Command, Crash, GatewayConfig, Message, Restart, Scenario, Sigterm

EVENT_KINDS: frozenset[str] = frozenset(name for name, kind in KINDS.items() if kind.optional)
"""The event kinds a gateway may lack (`sim.kinds.KINDS`, column `optional`)."""
SETTINGS: dict[str, str] = {
    # A feature of the contract a gateway may not have, and what the runner does about it.
    "muted": "a muted message is delivered as a plain one (logged unmuted, with a `skipped` record)",
    "daily_min_idle_minutes": "a scenario whose config uses it is skipped whole (outcome `skip`)",
    "restart_config": "a scenario with a `restart` that changes the configuration is skipped whole (outcome `skip`)",
    "reset_by_platform": "a scenario whose config sets a policy per platform is skipped whole (outcome `skip`)",
    "reset_by_chat_type": "a scenario whose config sets a policy per chat type is skipped whole (outcome `skip`)",
    "finalization_by_chat": "a scenario whose config gives some chats their own finalization is skipped whole (outcome `skip`)",
    "restart_after_cut_off_turn": "a scenario that stops (`sigterm` or `crash`) while a turn it sent is still owed its "
                                  "reply, and then restarts, is skipped whole (outcome `skip`)",
    "reset_default": "a scenario that leaves the reset policy to the gateway (`reset: default`) is skipped whole (outcome `skip`)",
    "providers": "the scenario's memory providers are left out: it runs, and is judged, with the recorder alone (a `skipped` record)",
    "several_providers": "a scenario whose config has more than one memory provider is skipped whole (outcome `skip`)",
    "shared_chat_ids": "a scenario in which two chats share a platform chat id (two users of one group, one id on two "
                       "platforms, two threads of one chat) is skipped whole (outcome `skip`)",
}
UNSUPPORTED_COMMANDS = frozenset({"/resume"})
"""Commands a gateway may lack (OpenClaw has no /resume): each such command event is skipped."""
FEATURES: frozenset[str] = EVENT_KINDS | frozenset(SETTINGS) | UNSUPPORTED_COMMANDS
"""Every name `Profile.unsupported` may hold: the event kinds, the settings of `SETTINGS` and the
commands of `UNSUPPORTED_COMMANDS`."""


def config_features(config: GatewayConfig) -> frozenset[str]:
    """The optional settings of `SETTINGS` that `config` uses (a gateway without one cannot be
    judged on a scenario that relies on it)."""
    used: set[str] = set()
    policies = [config.reset, *(p for _, p in config.reset_by_platform), *(p for _, p in config.reset_by_chat_type)]
    if any(p.daily_min_idle_minutes > 0 and p.mode in ("daily", "both") for p in policies):
        used.add("daily_min_idle_minutes")
    if config.reset_by_platform:
        used.add("reset_by_platform")
    if config.reset_by_chat_type:
        used.add("reset_by_chat_type")
    if config.finalization_by_chat:
        used.add("finalization_by_chat")
    if config.reset_default:
        used.add("reset_default")
    if len(config.providers) > 1:
        used.add("several_providers")
    return frozenset(used)


def cuts_off_a_turn_then_restarts(scenario: Scenario) -> bool:
    """Whether a `sigterm` or `crash` comes while a turn is owed its reply, and a `restart`
    follows: each chat's turns are answered one after another, `turn_latency` each (a `/stop`
    abandons the one in flight). A message or command sent while the gateway is down is held
    and delivered at the restart that brings it back, so its turn is timed from that restart.
    By the scenario's own timeline, not a run's."""
    events, latency = scenario.events, scenario.config.turn_latency
    busy_until: dict[str, int] = {}  # chat -> when its last turn sent is answered
    held: list[Message | Command] = []  # sent while down: delivered at the next restart
    up = True

    def deliver(event: Message | Command, at: int) -> None:
        if isinstance(event, Message):
            busy_until[event.chat] = max(at, busy_until.get(event.chat, at)) + latency
        elif event.name == "/stop":  # the turn in flight is abandoned: nothing of the chat is owed from `at` on
            busy_until[event.chat] = min(busy_until.get(event.chat, at), at - 1)

    for i, event in enumerate(events):
        if isinstance(event, (Message, Command)):
            if up:
                deliver(event, event.t)
            else:
                held.append(event)
        elif isinstance(event, Restart) and not up:  # a restart while up is skipped
            up = True
            for waiting in held:
                deliver(waiting, event.t)
            held = []
        elif isinstance(event, (Sigterm, Crash)) and up:  # a stop while down is skipped
            # a reply due at the stop's own instant comes after it when the stop runs before the timers
            ahead = event.order == BEFORE_TIMERS
            if any(until > event.t or (ahead and until == event.t) for until in busy_until.values()) \
                    and any(isinstance(e, Restart) for e in events[i + 1:]):
                return True
            busy_until, up = {}, False
    return False


def scenario_features(scenario: Scenario) -> frozenset[str]:
    """The optional settings of `SETTINGS` that `scenario` uses: its config's, those of the
    configurations its restarts change to, `restart_config` if any restart changes it,
    `shared_chat_ids` if two of its chats share a platform chat id, and
    `restart_after_cut_off_turn` if it restarts after a stop that cut a turn off."""
    used = set(config_features(scenario.config))
    if len({chat.platform_id for chat in scenario.chats}) < len(scenario.chats):
        used.add("shared_chat_ids")
    if cuts_off_a_turn_then_restarts(scenario):
        used.add("restart_after_cut_off_turn")
    config = scenario.config
    for event in scenario.events:
        if isinstance(event, Restart) and event.change is not None:
            config = event.change.apply(config)
            used |= config_features(config) | {"restart_config"}
    return frozenset(used)
