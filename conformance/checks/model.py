"""What the log says happened, and what the contract says should have: the checks' oracle.

`RunModel.build(records)` reads only the observation log. From the inputs (messages,
commands, the configuration) it derives, per chat, the *segments* a conforming gateway must
produce: runs of turns that share one session, and the boundary that ends each one. The
checks then compare the gateway's outputs against those segments.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from conformance.observations import Obs
from sim.clock import MINUTE, from_ms, next_daily_boundary_after
from sim.loader import config_from_document
from sim.scenario import GatewayConfig, ResetPolicy

EXPLICIT = ("new", "switch")


@dataclass
class Turn:
    """One user turn as the log shows it."""

    id: str
    chat: str
    arrival: int  # when the gateway could first see it (restart time if the platform held it)
    index: int  # record index of the input
    delegate: bool = False
    muted: bool = False
    request: Obs | None = None  # admission: the LLM request
    request_index: int = -1
    reply: Obs | None = None  # acknowledgment
    reply_index: int = -1
    replies: int = 0

    @property
    def acked(self) -> bool:
        return self.reply is not None

    @property
    def session(self) -> str | None:
        if self.reply is not None:
            return self.reply.session
        return self.request.session if self.request is not None else None


@dataclass
class Segment:
    """Turns of one chat that must share one session, and the boundary that ends them."""

    chat: str
    number: int
    turns: list[Turn] = field(default_factory=list)
    session: str | None = None  # observed: the session of its first admitted turn
    start: int = 0
    start_index: int = 0
    anchor: int = 0
    last_user: int = 0
    boundary: int | None = None  # when it ended, per the contract
    reason: str | None = None  # idle, daily, new, switch
    resumes: int | None = None  # for /resume: the number of the segment whose session it reopens

    def label(self) -> str:
        return self.session or f"{self.chat}#{self.number}"


@dataclass
class RunModel:
    records: list[Obs]
    name: str
    zone: ZoneInfo
    config: GatewayConfig
    chats: dict[str, dict[str, Any]]
    profile: dict[str, Any]
    turns: dict[str, Turn]
    segments: dict[str, list[Segment]]
    final: Obs | None
    failure: Obs | None
    stopped_at: list[tuple[int, int]]  # (down from, up at) windows, index-free times
    final_stop: int | None

    # -- rendering --------------------------------------------------------------------

    def at(self, t: int | None) -> str:
        """A virtual time as a person reads it, in the scenario's zone."""
        if t is None:
            return "never"
        moment = from_ms(t, self.zone)
        start = from_ms(self.records[0].t, self.zone) if self.records else moment
        if moment.date() == start.date():
            return moment.strftime("%H:%M:%S" if moment.second or moment.microsecond else "%H:%M")
        return moment.strftime("%a %H:%M:%S" if moment.second else "%a %H:%M")

    def policy(self, chat: str) -> ResetPolicy:
        info = self.chats.get(chat, {})
        return self.config.policy_for(info.get("platform", "telegram"), info.get("chat_type", "dm"))

    def of(self, *kinds: str) -> list[tuple[int, Obs]]:
        return [(i, r) for i, r in enumerate(self.records) if r.kind in kinds]

    @property
    def eager(self) -> bool:
        return self.profile.get("finalization") == "eager"

    @property
    def latency(self) -> int:
        return int(self.profile.get("latency", 0))

    def chat_sessions(self) -> set[str]:
        return {t.session for t in self.turns.values() if not t.delegate and t.session}

    def delegate_sessions(self) -> set[str]:
        return {t.session for t in self.turns.values() if t.delegate and t.session}

    def acked_in(self, session: str, before: int | None = None) -> list[Turn]:
        """Acknowledged turns of `session`, in acknowledgment order (optionally before an index)."""
        turns = [t for t in self.turns.values() if t.acked and t.session == session]
        if before is not None:
            turns = [t for t in turns if t.reply_index < before]
        return sorted(turns, key=lambda t: t.reply_index)

    def down_at(self, t: int) -> int | None:
        """If the gateway was stopped at `t`, when it came back (None if it was up)."""
        for down, up in self.stopped_at:
            if down <= t < up:
                return up
        return None

    # -- building ---------------------------------------------------------------------

    @staticmethod
    def build(records: list[Obs]) -> RunModel:
        if not records or records[0].kind != "scenario":
            raise ValueError("an observation log starts with its 'scenario' record")
        head = records[0]
        config = config_from_document(head.d("config"))
        zone = ZoneInfo(head.d("zone"))
        turns: dict[str, Turn] = {}
        held: list[Turn] = []
        commands: dict[str, list[tuple[int, int, str]]] = defaultdict(list)  # chat -> (t, index, name)
        held_commands: list[tuple[str, int, str]] = []
        stopped: list[tuple[int, int]] = []
        down_since: int | None = None
        final = failure = None
        final_stop = None
        for index, r in enumerate(records):
            kind = r.kind
            if kind in ("message", "delegate"):
                turn = Turn(r.turns[0], r.chat or "", r.t, index, delegate=kind == "delegate", muted=bool(r.d("muted")))
                turns[turn.id] = turn
                if r.d("queued"):
                    held.append(turn)
            elif kind == "command":
                if r.d("queued"):
                    held_commands.append((r.chat or "", index, r.d("command")))
                else:
                    commands[r.chat or ""].append((r.t, index, r.d("command")))
            elif kind == "restart":
                for turn in held:
                    turn.arrival = r.t
                held.clear()
                for chat, cindex, name in held_commands:
                    commands[chat].append((r.t, cindex, name))
                held_commands.clear()
                if down_since is not None:
                    stopped.append((down_since, r.t))
                    down_since = None
            elif kind in ("sigterm", "crash"):
                if r.d("final"):
                    final_stop = r.t
                elif down_since is None:
                    down_since = r.t
            elif kind == "llm_request" and r.turns and r.turns[0] in turns:
                turn = turns[r.turns[0]]
                if turn.request is None:
                    turn.request, turn.request_index = r, index
            elif kind == "reply" and r.turns and r.turns[0] in turns:
                turn = turns[r.turns[0]]
                turn.replies += 1
                if turn.reply is None:
                    turn.reply, turn.reply_index = r, index
            elif kind == "durable" and r.d("label") == "final":
                final = r
            elif kind == "error":
                failure = r
        if down_since is not None:
            stopped.append((down_since, 1 << 62))
        model = RunModel(records, head.d("name"), zone, config, head.d("chats") or {}, head.d("profile") or {},
                         turns, {}, final, failure, stopped, final_stop)
        for chat in sorted(model.chats):
            model.segments[chat] = _segments(model, chat, commands.get(chat, []))
        return model


def expiry_instant(policy: ResetPolicy, anchor: int, last_user: int, zone: ZoneInfo) -> tuple[int, str] | None:
    """The first instant the entry is past a policy boundary, if no user message comes."""
    options: list[tuple[int, str]] = []
    if policy.mode in ("idle", "both"):
        options.append((last_user + policy.idle_minutes * MINUTE + 1, "idle"))
    if policy.mode in ("daily", "both"):
        boundary = next_daily_boundary_after(anchor, policy.at_hour, zone)
        options.append((max(boundary, last_user + policy.daily_min_idle_minutes * MINUTE), "daily"))
    return min(options) if options else None


def _segments(model: RunModel, chat: str, commands: list[tuple[int, int, str]]) -> list[Segment]:
    """Walk the chat's admitted turns and commands in order; cut where the contract cuts."""
    policy = model.policy(chat)
    admitted = sorted(
        (t for t in model.turns.values() if t.chat == chat and not t.delegate and t.request is not None),
        key=lambda t: t.request_index,
    )
    # A command takes effect when it arrives, or after the turn in flight then (never mid-turn).
    effective: list[tuple[int, int, str]] = []
    for t, index, name in commands:
        when = t
        for turn in admitted:
            if turn.request is not None and turn.request.t <= t and turn.request_index < index:
                done = turn.reply.t if turn.reply is not None else None
                if done is not None and done > when:
                    when = done
        effective.append((when, index, name))
    effective.sort()
    segments: list[Segment] = []
    current: Segment | None = None
    cursor = 0

    def close(at: int, reason: str) -> None:
        nonlocal current
        if current is not None and current.boundary is None:
            current.boundary, current.reason = at, reason
        current = None

    def apply_commands(until: int, until_index: int) -> None:
        nonlocal cursor, current
        while cursor < len(effective) and (effective[cursor][0], effective[cursor][1]) <= (until, until_index):
            when, index, name = effective[cursor]
            cursor += 1
            if current is not None and current.boundary is None:
                expiry = expiry_instant(policy, current.anchor, current.last_user, model.zone)
                if expiry is not None and expiry[0] <= when:
                    close(*expiry)
            if name in ("/new", "/reset") and current is not None:
                close(when, "new")
            elif name == "/resume":
                left = current if current is not None else (segments[-1] if segments else None)
                previous = [s for s in segments if left is None or s.number < left.number]
                if not previous:
                    continue
                if current is not None:
                    close(when, "switch")
                target = previous[-1] if left is None else _previous_distinct(segments, left)
                if target is None:
                    continue
                current = Segment(chat, len(segments), session=target.session, start=when, start_index=index,
                                  anchor=when, last_user=when, resumes=target.number)
                segments.append(current)

    for turn in admitted:
        assert turn.request is not None
        x = turn.request.t
        apply_commands(x, turn.request_index)
        if current is not None:
            expiry = expiry_instant(policy, current.anchor, current.last_user, model.zone)
            if expiry is not None and expiry[0] <= x:
                close(*expiry)
        if current is None:
            current = Segment(chat, len(segments), start=x, start_index=turn.request_index, anchor=turn.arrival)
            segments.append(current)
        if current.session is None:
            current.session = turn.session
        current.turns.append(turn)
        current.last_user = turn.arrival
    apply_commands(1 << 62, 1 << 62)
    if current is not None and current.boundary is None:
        expiry = expiry_instant(policy, current.anchor, current.last_user, model.zone)
        horizon = model.final_stop if model.final_stop is not None else (model.records[-1].t if model.records else 0)
        if expiry is not None and expiry[0] <= horizon:
            close(*expiry)
    return segments


def _previous_distinct(segments: list[Segment], left: Segment) -> Segment | None:
    """The segment /resume returns to: the last one before `left` with another session."""
    for segment in reversed(segments[: left.number]):
        if segment.session != left.session or segment.session is None:
            return segment
    return None


@dataclass(frozen=True)
class Deletion:
    """Another surface removed a session row. `lost`: nothing in the gateway could restore
    what was stored (no live agent held it, or the session had already ended)."""

    session: str
    index: int
    t: int
    lost: bool


def deletions(m: RunModel) -> list[Deletion]:
    """Every session row removed, with cascades to delegate children (delete_session only)."""
    parents: dict[str, str] = {}
    for turn in m.turns.values():
        if turn.delegate and turn.session and turn.request is not None:
            parent = _chat_session_at(m, turn.chat, turn.request_index)
            if parent:
                parents[turn.session] = parent
    cached: set[str] = set()
    ended: dict[str, int] = {}
    out: list[Deletion] = []
    for index, r in enumerate(m.records):
        if r.kind == "resources":
            cached = {sid for sid, _busy in r.d("cached", [])}
        elif r.kind == "on_session_end" and r.session:
            ended[r.session] = index
        elif r.kind in ("delete_session", "delete_parent") and r.session:
            removed = [r.session]
            if r.kind == "delete_session":
                removed += sorted(child for child, parent in parents.items() if parent == r.session)
            for sid in removed:
                live_segment = _live(m, sid, index)
                lost = sid not in cached or (sid in ended and not live_segment)
                out.append(Deletion(sid, index, r.t, lost))
    return out


def _live(m: RunModel, session: str, index: int) -> bool:
    """Whether `session` was the live session of some chat at record `index`."""
    for segments in m.segments.values():
        for seg in segments:
            if seg.session == session and seg.start_index <= index and not _closed_before(m, seg, index):
                return True
    return any(t.session == session for t in m.turns.values() if t.delegate)


def _closed_before(m: RunModel, seg: Segment, index: int) -> bool:
    for i, r in enumerate(m.records[:index]):
        if r.kind == "on_session_end" and r.session == seg.session and i >= seg.start_index:
            return True
    return False


def _chat_session_at(m: RunModel, chat: str, index: int) -> str | None:
    current = None
    for seg in m.segments.get(chat, []):
        if seg.start_index <= index:
            current = seg.session
    return current


def excused_from_store(m: RunModel, turn: Turn, at_index: int, cuts: list[Deletion]) -> str | None:
    """Why an acknowledged turn need not be in a store snapshot taken at `at_index`, if it need not."""
    session = turn.session
    for cut in reversed(cuts):
        if cut.session != session or cut.index > at_index or cut.index < turn.reply_index:
            continue
        if cut.lost:
            return "its row was deleted while no live agent held the transcript"
        flushed = any(
            t.acked and t.session == session and cut.index < t.reply_index <= at_index for t in m.turns.values()
        )
        if not flushed:
            return "its row was deleted and no flush has happened since"
        break
    if not m.profile.get("crash_durable", True):
        for index, r in enumerate(m.records[turn.reply_index:at_index], start=turn.reply_index):
            if r.kind == "crash":
                return "the gateway does not claim crash durability"
    return None
