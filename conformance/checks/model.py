"""What the log says happened, and what the contract says should have: the checks' oracle.

`RunModel.build(records)` reads only the observation log. From the inputs (messages,
commands, the configuration) it derives, per chat, the *segments* a conforming gateway must
produce: runs of turns that share one session, and the boundary that ends each one. The
checks then compare the gateway's outputs against those segments. Indexes (records by kind
and session, turns by session) are built once, so every check stays linear on big logs.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from operator import attrgetter
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from conformance.observations import Obs
from sim.clock import MINUTE, from_ms, load_zone, next_daily_boundary_after
from sim.loader import config_from_document
from sim.scenario import GatewayConfig, ResetPolicy

NEVER = 1 << 62
# The kinds `RunModel.of_session` answers for: indexing every record by session cost more
# than the checks that read it.
SESSION_KINDS = frozenset({"on_session_end", "on_session_finalize", "on_session_switch", "on_session_reset", "sync_turn"})


# A command as the model orders it: (time, record index where it takes its place, name, record
# index of its arrival). The two indexes differ only for a command held while the gateway was
# down (`_delivered`).
CommandAt = tuple[int, int, str, int]


class Stamp(NamedTuple):
    """When and in which session an LLM request or reply was logged: all a turn keeps of it
    (not the record, which a spilled log would hand over as a fresh copy per turn)."""

    t: int
    session: str | None


@dataclass(slots=True)
class Turn:
    """One user turn as the log shows it."""

    id: str
    chat: str
    arrival: int  # when the gateway could first see it (restart time if the platform held it)
    index: int  # record index of the input
    delegate: bool = False
    muted: bool = False
    request: Stamp | None = None  # admission: the LLM request
    request_index: int = -1
    asked: int = 0  # the last LLM request for it before its reply: when the answer it got was asked
    reply: Stamp | None = None  # acknowledgment
    reply_index: int = -1
    replies: int = 0
    done: tuple[int, int] = (NEVER, NEVER)  # (time, index) the turn ended: its reply, or a /stop or stop abandoning it
    ended_by: str = ""  # what ended it: 'reply', '/stop', 'sigterm', 'crash', or 'dropped' (answered by the LLM, never replied)
    stopped: tuple[int, int] | None = None  # (time, index) of the /stop that abandoned it (a reply after it is owed to no one)

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
    reopens: bool = False  # that segment is the one just before: it had ended and nothing was left behind
    window: tuple[int, int] = (0, NEVER)  # record indexes of this life of its session (set by build)

    def label(self) -> str:
        return self.session or f"{self.chat}#{self.number}"


@dataclass
class RunModel:
    records: Sequence[Obs]  # a list, or a spilled log read back from its file (conformance.harness.spill)
    name: str
    zone: ZoneInfo
    config: GatewayConfig
    chats: dict[str, dict[str, Any]]
    profile: dict[str, Any]
    turns: dict[str, Turn]
    segments: dict[str, list[Segment]]
    failure: Obs | None
    stopped_at: list[tuple[int, int]]  # (down from, up at) windows, index-free times
    final_stop: int | None
    final_index: int = -1  # the final durable snapshot's record (`final`), or -1
    # Record indexes, ascending, as 8-byte arrays (a list of ints costs 36 bytes an index).
    by_kind: dict[str, array[int]] = field(default_factory=dict, repr=False)
    by_session: dict[tuple[str, str], array[int]] = field(default_factory=dict, repr=False)  # (kind, session), SESSION_KINDS
    acked_by_session: dict[str, list[Turn]] = field(default_factory=dict, repr=False)  # in reply order
    memo: dict[str, Any] = field(default_factory=dict, repr=False)  # derived views (deletions…)
    # The configurations restarts changed to, as (in force from, config): from the stop before
    # the restart (a down gateway fires nothing; the restarted one judges its downtime by the
    # configuration it came back with). Empty: `config` throughout.
    changes: list[tuple[int, GatewayConfig]] = field(default_factory=list, repr=False)

    # -- rendering --------------------------------------------------------------------

    def at(self, t: int | None) -> str:
        """A virtual time as a person reads it, in the scenario's zone (to the second)."""
        return time_text(t, self.zone, self.records[0].t if self.records else t)

    def policy(self, chat: str, t: int | None = None) -> ResetPolicy:
        """The chat's reset policy in force at `t` (None: the scenario's own, before any change)."""
        config = self.config
        for since, changed in self.changes:
            if t is None or since > t:
                break
            config = changed
        info = self.chats.get(chat, {})
        return config.policy_for(info.get("platform", "telegram"), info.get("chat_type", "dm"))

    def policies(self, chat: str) -> list[ResetPolicy]:
        """Every reset policy the chat is under in the run, in order."""
        return [self.policy(chat), *(self.policy(chat, since) for since, _ in self.changes)]

    def expiry(self, chat: str, anchor: int, last_user: int) -> tuple[int, str] | None:
        """The first instant the chat's entry is past a boundary of the policy in force then,
        if no user message comes: under each policy from when it is in force (a policy that
        finds the entry already past when it comes in force ends it at that instant)."""
        if not self.changes:
            return expiry_instant(self.policy(chat), anchor, last_user, self.zone)
        starts = [0, *(since for since, _ in self.changes)]
        for k, since in enumerate(starts):
            until = starts[k + 1] if k + 1 < len(starts) else NEVER
            expiry = expiry_instant(self.policy(chat, since if k else None), anchor, last_user, self.zone)
            if expiry is not None and max(expiry[0], since) < until:
                return max(expiry[0], since), expiry[1]
        return None

    # -- looking things up ------------------------------------------------------------

    def of(self, *kinds: str) -> Iterator[tuple[int, Obs]]:
        """Records of these kinds, in log order, with their indexes (streamed: a spilled log
        reads them from its file in one forward pass, and none is kept)."""
        lists = [self.by_kind.get(kind, ()) for kind in kinds]
        indexes = lists[0] if len(lists) == 1 else list(heapq.merge(*lists))
        pick = getattr(self.records, "pick", None)
        return zip(indexes, pick(indexes) if pick is not None else map(self.records.__getitem__, indexes), strict=True)

    def of_session(self, kind: str, session: str, lo: int = 0, hi: int = NEVER) -> list[tuple[int, Obs]]:
        """Records of one kind (one of SESSION_KINDS) about one session, with index in [lo, hi)."""
        if kind not in SESSION_KINDS:
            raise ValueError(f"records of kind {kind!r} are not indexed by session")
        indexes = self.by_session.get((kind, session), [])
        return [(i, self.records[i]) for i in indexes[bisect_left(indexes, lo):bisect_left(indexes, hi)]]

    def ends_in(self, seg: Segment) -> list[tuple[int, Obs]]:
        """The on_session_end calls that belong to this life of the segment's session."""
        return self.of_session("on_session_end", seg.session or "", *seg.window)

    @property
    def final(self) -> Obs | None:
        """The final durable snapshot, read when asked: it holds every stored row, the largest
        record of a long run, which the model does not keep."""
        return self.records[self.final_index] if self.final_index >= 0 else None

    @property
    def eager(self) -> bool:
        """The gateway-wide mode the gateway declared (a chat may have its own: `finalization`)."""
        return self.profile.get("finalization") == "eager"

    def finalization(self, chat: str) -> str:
        """How the chat's policy boundaries are acted on: its own mode in the config, else the
        gateway's declared one."""
        return self.config.finalization_for(chat) or ("eager" if self.eager else "lazy")

    @property
    def watched(self) -> bool:
        """Some chat's boundaries are acted on by a watcher: the gateway is eager, or a chat is."""
        return self.eager or any(mode == "eager" for _, mode in self.config.finalization_by_chat)

    @property
    def latency(self) -> int:
        return int(self.profile.get("latency", 0))

    def chat_sessions(self) -> set[str]:
        if "chats" not in self.memo:
            self.memo["chats"] = {t.session for t in self.turns.values() if not t.delegate and t.session}
        return self.memo["chats"]

    def folded(self) -> dict[str, int]:
        """When each turn a gateway folded into another turn's request (its prompt's last message
        carried both) was answered: at that request's reply. The reply is credited to the
        request's first turn; the others are answered by it too (I9), and are no turn left
        unacknowledged (I1, I2, I3)."""
        if "folded" in self.memo:
            return self.memo["folded"]  # type: ignore[no-any-return]
        replies: dict[str, list[tuple[int, int]]] = defaultdict(list)  # credited turn -> (index, t) of its replies
        for index, r in self.of("reply"):
            if r.turns:
                replies[r.turns[0]].append((index, r.t))
        out: dict[str, int] = {}
        for index, r in self.of("llm_request"):
            if len(r.turns) < 2:
                continue
            answer = next((t for i, t in replies.get(r.turns[0], ()) if i > index), None)
            if answer is not None:
                for turn in r.turns[1:]:
                    out[turn] = min(out.get(turn, answer), answer)
        self.memo["folded"] = out
        return out

    def unacknowledged(self, turn: Turn) -> bool:
        """A turn that must leave nothing behind: never replied, nor answered folded into another."""
        return turn.reply is None and turn.id not in self.folded()

    def delegate_sessions(self) -> set[str]:
        if "delegates" not in self.memo:
            self.memo["delegates"] = {t.session for t in self.turns.values() if t.delegate and t.session}
        return self.memo["delegates"]

    def acked_in(self, session: str, before: int | None = None) -> list[Turn]:
        """Acknowledged turns of `session`, in acknowledgment order (optionally before an index)."""
        turns = self.acked_by_session.get(session, [])
        if before is None:
            return list(turns)
        return turns[: bisect_left(self._ack_indexes(session), before)]

    def next_ack(self, session: str, after: int) -> Turn | None:
        """The first turn of `session` acknowledged after record `after` (its next flush)."""
        turns = self.acked_by_session.get(session, [])
        k = bisect_right(self._ack_indexes(session), after)
        return turns[k] if k < len(turns) else None

    def _ack_indexes(self, session: str) -> list[int]:
        table = self.memo.setdefault("ack_indexes", {})
        if session not in table:
            table[session] = [t.reply_index for t in self.acked_by_session.get(session, [])]
        return table[session]

    # -- building ---------------------------------------------------------------------

    @staticmethod
    def build(records: Sequence[Obs]) -> RunModel:
        if not records or records[0].kind != "scenario":
            raise ValueError("an observation log starts with its 'scenario' record")
        head = records[0]
        config = config_from_document(head.d("config"))
        if config.reset_default:  # the policy in force is the one the gateway reported (Profile.reset_default)
            from conformance.adapter import policy_from_detail

            default = (head.d("profile") or {}).get("reset_default")
            if default is not None:  # None: the runner refused the scenario (its `error` record says so)
                config = config.with_default(policy_from_detail(default))
        zone = load_zone(head.d("zone"))
        turns: dict[str, Turn] = {}
        held: list[Turn] = []
        commands: dict[str, list[CommandAt]] = defaultdict(list)
        held_commands: list[tuple[str, int, str]] = []
        deliveries: list[tuple[int, int, list[Turn], list[tuple[str, int, str]]]] = []  # see `_delivered`
        stopped: list[tuple[int, int]] = []
        changes: list[tuple[int, GatewayConfig]] = []
        by_kind: dict[str, array[int]] = defaultdict(_indexes)
        by_session: dict[tuple[str, str], array[int]] = defaultdict(_indexes)
        down_since: int | None = None
        failure = None
        final_stop = None
        final_index = -1
        # Chat and session names, one copy each: a record read back from a spilled log brings
        # its own copy of every string, and a turn keeps three.
        names: dict[str | None, str | None] = {}
        for index, (kind, r) in enumerate(_walk(records)):
            by_kind[kind].append(index)
            if r is None:
                continue
            if kind in SESSION_KINDS and r.session is not None:
                by_session[(kind, r.session)].append(index)
            if kind in _PASSIVE:
                continue
            if kind in ("message", "delegate"):
                chat = r.chat or ""
                turn = Turn(r.turns[0], names.setdefault(chat, chat), r.t, index, delegate=kind == "delegate",
                            muted=bool(r.d("muted")))
                turns[turn.id] = turn
                if r.d("queued"):
                    held.append(turn)
            elif kind == "command":
                if r.d("queued"):
                    held_commands.append((r.chat or "", index, r.d("command")))
                else:
                    commands[r.chat or ""].append((r.t, index, r.d("command"), index))
            elif kind == "restart":
                if r.d("config") is not None:  # the restart changed the configuration (sim.scenario.ConfigChange)
                    changed = config_from_document(r.d("config")).with_default(config.reset)
                    changes.append((down_since if down_since is not None else r.t, changed))
                for turn in held:
                    turn.arrival = r.t
                if held_commands:
                    deliveries.append((index, r.t, list(held), list(held_commands)))
                held.clear()
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
                    turn.request, turn.request_index = Stamp(r.t, names.setdefault(r.session, r.session)), index
                if turn.reply is None:  # a gateway that interrupts and asks again is answered at the last ask
                    turn.asked = r.t
            elif kind == "reply" and r.turns and r.turns[0] in turns:
                turn = turns[r.turns[0]]
                turn.replies += 1
                if turn.reply is None:
                    turn.reply, turn.reply_index = Stamp(r.t, names.setdefault(r.session, r.session)), index
            elif kind == "durable" and r.d("label") == "final":
                final_index = index
            elif kind == "error":
                failure = r
        if down_since is not None:
            stopped.append((down_since, NEVER))
        for restart in deliveries:
            for chat, command in _delivered(*restart):
                commands[chat].append(command)
        acked: dict[str, list[Turn]] = defaultdict(list)
        for turn in sorted((t for t in turns.values() if t.acked and t.session), key=lambda t: t.reply_index):
            acked[turn.session or ""].append(turn)
        model = RunModel(records, head.d("name"), zone, config, head.d("chats") or {}, head.d("profile") or {},
                         turns, {}, failure, stopped, final_stop, final_index,
                         dict(by_kind), dict(by_session), dict(acked), changes=changes)
        by_chat: dict[str, list[Turn]] = defaultdict(list)
        for turn in turns.values():
            if turn.request is not None:
                by_chat[turn.chat].append(turn)
        _mark_done(model, by_chat, commands)
        for chat in by_chat:
            by_chat[chat] = [t for t in by_chat[chat] if not t.delegate]
        for chat in sorted(model.chats):
            model.segments[chat] = _segments(model, chat, by_chat.get(chat, []), commands.get(chat, []))
            _set_windows(model, model.segments[chat])
        return model


_indexes = partial(array, "q")


def time_text(t: int | None, zone: ZoneInfo, start: int | None) -> str:
    """`t` as a person reads it in `zone`: a time of day, with the weekday when not `start`'s day."""
    if t is None:
        return "never"
    moment = from_ms(t, zone)
    first = from_ms(start, zone) if start is not None else moment
    if moment.date() == first.date():
        return moment.strftime("%H:%M:%S" if moment.second else "%H:%M")
    return moment.strftime("%a %H:%M:%S" if moment.second else "%a %H:%M")


# Kinds `RunModel.build` only indexes (the frequent outputs): the walk skips its other cases.
_PASSIVE = frozenset({"resources", "ingest", "sync_turn", "on_session_end", "on_session_finalize", "on_session_switch",
                      "on_session_reset", "note"})


# Of those, the kinds the walk needs nothing of but the kind: a spilled log leaves them unparsed.
_UNREAD = _PASSIVE - SESSION_KINDS
_kind = attrgetter("kind")


def _walk(records: Sequence[Obs]) -> Iterator[tuple[str, Obs | None]]:
    """(kind, record) for each record in order; the record is None where the walk reads
    only the kind and the log is spilled (its file knows each line's kind)."""
    walk = getattr(records, "walk", None)
    if walk is None:
        return zip(map(_kind, records), records, strict=True)
    return walk(_UNREAD)  # type: ignore[no-any-return]


_next_boundary = lru_cache(maxsize=4096)(next_daily_boundary_after)  # asked per turn with the segment's anchor


def expiry_instant(policy: ResetPolicy, anchor: int, last_user: int, zone: ZoneInfo) -> tuple[int, str] | None:
    """The first instant the entry is past a policy boundary, if no user message comes."""
    options: list[tuple[int, str]] = []
    if policy.mode in ("idle", "both"):
        options.append((last_user + policy.idle_minutes * MINUTE + 1, "idle"))
    if policy.mode in ("daily", "both"):
        boundary = _next_boundary(anchor, policy.at_hour, zone)
        options.append((max(boundary, last_user + policy.daily_min_idle_minutes * MINUTE), "daily"))
    return min(options) if options else None


def _delivered(restart: int, t: int, turns: list[Turn], held: list[tuple[str, int, str]]) -> Iterator[tuple[str, CommandAt]]:
    """Where the commands held while the gateway was down take their place in the log. The
    platform delivers what it held at the restart, in arrival order, each chat's turns one at
    a time (a turn waits behind the one in flight; `/stop` abandons that one and the next
    starts). A command logs nothing when it is delivered, so its place is just after the
    request of the turn in flight at that moment (the restart, if none was): a held `/stop`
    abandons the turn it found running, not one its arrival record precedes."""
    pending = sorted([(turn.index, turn) for turn in turns if not turn.delegate and turn.request is not None]
                     + [(index, (chat, name)) for chat, index, name in held], key=lambda item: item[0])
    running: dict[str, Turn] = {}
    waiting: dict[str, list[Turn]] = defaultdict(list)
    for arrival, item in pending:
        if isinstance(item, Turn):
            if item.chat in running:
                waiting[item.chat].append(item)
            else:
                running[item.chat] = item
            continue
        chat, name = item
        now = running.get(chat)
        yield chat, (t, restart if now is None else now.request_index + 1, name, arrival)
        if name == "/stop" and now is not None:
            del running[chat]
            if waiting[chat]:
                running[chat] = waiting[chat].pop(0)


def _mark_done(m: RunModel, chat_turns: dict[str, list[Turn]], commands: dict[str, list[CommandAt]]) -> None:
    """Each admitted turn's end: the /stop in its chat that found it in flight (a reply after it
    does not undo it), else its reply, else the stop (sigterm, crash) that abandoned it, else,
    if none came before the LLM answered (a locked store holding the write until the lock
    ends), the moment the gateway dropped it: its answer. A /stop abandons chat turns only: a
    delegate runs on."""
    stops = [(m.records[i].t, i, m.records[i].kind) for i in sorted([*m.by_kind.get("sigterm", ()), *m.by_kind.get("crash", ())])]
    locks = sorted((r.t, int(r.d("until", r.t))) for _i, r in m.of("db_locked"))
    times: list[int] = []  # record times, read only if a turn was dropped
    for chat, turns in chat_turns.items():
        slash = [(t, i, "/stop") for t, i, name, _arrival in commands.get(chat, []) if name == "/stop"]
        ends = sorted(slash + stops, key=lambda s: s[1])
        indexes = [i for _t, i, _by in ends]
        plain = [end for end in ends if end[2] != "/stop"]  # what ends a delegate
        plain_indexes = [i for _t, i, _by in plain]
        for turn in turns:
            if turn.reply is not None:
                k = bisect_right(indexes, turn.request_index)
                if not turn.delegate and k < len(ends) and ends[k][2] == "/stop" and ends[k][1] < turn.reply_index:
                    turn.stopped = turn.done = (ends[k][0], ends[k][1])
                    turn.ended_by = "/stop"
                    continue
                turn.done, turn.ended_by = (turn.reply.t, turn.reply_index), "reply"
                continue
            assert turn.request is not None
            answer = turn.asked + m.config.turn_latency
            for locked, until in locks:
                if locked <= answer <= until:
                    answer = until + m.config.turn_latency  # the write waits out the lock, then one more try
            mine, at = (plain, plain_indexes) if turn.delegate else (ends, indexes)
            k = bisect_right(at, turn.request_index)
            if k < len(mine) and mine[k][0] <= answer:
                turn.done, turn.ended_by = (mine[k][0], mine[k][1]), mine[k][2]
                if turn.ended_by == "/stop":
                    turn.stopped = turn.done
                continue
            if not times:
                times = [r.t for r in m.records]
            turn.done, turn.ended_by = (answer, bisect_right(times, answer)), "dropped"


def _effective(m: RunModel, admitted: list[Turn], commands: list[CommandAt]) -> list[tuple[int, int, str]]:
    """When each command takes effect, as (time, record index, name): on arrival, or once
    every turn that arrived before it in the chat is done (never mid-turn; the chat is served
    in arrival order). Behind a turn that ends after the log, never."""
    by_arrival = sorted(admitted, key=lambda t: t.index)
    arrivals = [t.index for t in by_arrival]
    done: list[tuple[int, int]] = []  # done[k]: the latest end among the first k+1 arrivals
    latest = (-1, -1)
    for turn in by_arrival:
        latest = max(latest, turn.done)
        done.append(latest)
    effective: list[tuple[int, int, int, str]] = []
    for t, index, name, arrival in commands:
        k = bisect_left(arrivals, arrival)
        when = max((t, index), done[k - 1] if k else (t, index))
        if when[1] >= len(m.records):
            continue  # queued behind a turn that ends after the log does (never, or cut by a gateway error)
        if when != (t, index) and m.records[when[1]].kind in ("sigterm", "crash"):
            continue  # queued behind a turn the process died with: lost with the process, like that turn
        effective.append((*when, arrival, name))
    return [(t, index, name) for t, index, _arrival, name in sorted(effective)]  # ties keep arrival order


def _segments(model: RunModel, chat: str, turns: list[Turn], commands: list[CommandAt]) -> list[Segment]:
    """Walk the chat's admitted turns and commands in order; cut where the contract cuts."""
    admitted = sorted(turns, key=lambda t: t.request_index)
    effective = _effective(model, admitted, commands)
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
                expiry = model.expiry(chat, current.anchor, current.last_user)
                if expiry is not None and expiry[0] <= when:
                    close(*expiry)
            if name in ("/new", "/reset") and current is not None:
                close(when, "new")
            elif name == "/resume":
                reopens = current is None
                if reopens:  # past a boundary, its successor not begun: back to the session that ended
                    target = segments[-1] if segments else None
                else:
                    target = _previous_distinct(segments, current) if current.number else None
                    if target is not None:
                        close(when, "switch")
                if target is None:
                    continue  # nothing before it to return to
                current = Segment(chat, len(segments), session=target.session, start=when, start_index=index,
                                  anchor=when, last_user=when, resumes=target.number, reopens=reopens)
                segments.append(current)

    for turn in admitted:
        assert turn.request is not None
        x = turn.request.t
        apply_commands(x, turn.request_index)
        if current is not None:
            expiry = model.expiry(chat, current.anchor, current.last_user)
            if expiry is not None and expiry[0] <= x:
                close(*expiry)
        if current is None:
            current = Segment(chat, len(segments), start=x, start_index=turn.request_index, anchor=turn.arrival)
            segments.append(current)
        if current.session is None:
            current.session = turn.session
        current.turns.append(turn)
        current.last_user = turn.arrival
    apply_commands(NEVER, NEVER)
    if current is not None and current.boundary is None:
        expiry = model.expiry(chat, current.anchor, current.last_user)
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


def _after_ending(m: RunModel, session: str, start: int, since: int) -> int:
    """Where a reopened life begins: at the /resume, or, if the life before it (from `since`)
    had not ended by then, after that end and its finalize, which the gateway delivered at the
    /resume itself (a command past a boundary notices it; commands queued together run so)."""
    if m.of_session("on_session_end", session, since, start):
        return start
    t, lo = m.records[start].t, start
    for kind in ("on_session_end", "on_session_finalize"):
        first = m.of_session(kind, session, start)[:1]
        if first and (first[0][1].t == t or _died_taking(m, start, first[0][0])):
            lo = max(lo, first[0][0] + 1)
    return lo


def _died_taking(m: RunModel, command: int, end: int) -> bool:
    """The gateway died at a crash point while it took the command (the `crash` record naming
    the point comes in the command's own step, before `end`): the platform hands the command
    over again at the restart, where the end it noticed is finished."""
    step = m.records[command].step
    return any(m.records[i].step == step and m.records[i].d("point") for i, _ in m.of("crash") if command < i < end)


def _set_windows(m: RunModel, segments: list[Segment]) -> None:
    """Each segment's life of its session: from its start (from the log's start for the
    session's first life in the chat) to the start of the session's next life. A /resume's
    life starts at the gateway's first switch into it that began no earlier life, so resumes
    that take effect at the same record (queued behind one turn, even back to one session
    twice) keep their lives apart."""
    starts = []
    seen: set[str | None] = set()
    taken: dict[str, int] = {}  # session -> the last switch into it that began one of its lives
    for seg in segments:
        lo = 0
        if seg.session in seen:
            lo = seg.start_index
            if seg.reopens and seg.session and seg.resumes is not None:
                lo = _after_ending(m, seg.session, seg.start_index, starts[seg.resumes])
            elif seg.resumes is not None and seg.session:
                switches = m.by_session.get(("on_session_switch", seg.session), [])
                k = bisect_left(switches, max(seg.start_index, taken.get(seg.session, -1) + 1))
                if k < len(switches):
                    lo = taken[seg.session] = switches[k]
        seen.add(seg.session)
        starts.append(lo)
    next_start: dict[str | None, int] = {}
    for seg, lo in zip(reversed(segments), reversed(starts), strict=True):
        seg.window = (lo, next_start.get(seg.session, len(m.records)))
        next_start[seg.session] = lo if lo else seg.start_index
