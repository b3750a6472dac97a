"""The oracle's one pass over the log: the turns, the commands in their places, the stops, and
the indexes by kind and session the checks look records up with."""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from conformance.checks.model.facts import _ABSENT as ABSENT
from conformance.checks.model.facts import (
    NEVER,
    SESSION_KINDS,
    CommandAt,
    Delivery,
    Downtime,
    HeldCommand,
    PolicyChange,
    Turn,
    new_command,
)
from conformance.checks.model.log import LogView
from conformance.checks.parts import LogPart
from conformance.observations import Obs
from sim.clock import load_zone
from sim.loader import config_from_document


@dataclass(slots=True)
class Walked:
    """What the pass read besides the view: the inputs the segments are derived from."""

    view: LogView
    turns: dict[str, Turn]
    commands: dict[str, list[CommandAt]]  # chat -> its commands, held ones in their delivered places
    failure: Obs | None
    stopped_at: list[Downtime]
    acked_by_session: dict[str, list[Turn]]  # in reply order
    unanswering: dict[str, list[int]]  # turn -> its reply records that did not answer it (I9; few, or none)


def _index_arrays(records: Sequence[Obs]) -> Callable[[], array[int]]:
    """A new empty array of record indexes: 4 bytes an index where every index fits (a long
    run's log is millions of records, and "q" took 8 bytes each)."""
    return partial(array, "I" if len(records) < 1 << 32 and array("I").itemsize == 4 else "q")


# Kinds the walk only indexes (the frequent outputs): it skips its other cases.
_PASSIVE = frozenset({"resources", "ingest", "sync_turn", "on_session_end", "on_session_finalize", "on_session_switch",
                      "on_session_reset", "note"})
# Of those, the kinds the walk needs nothing of but the kind: a spilled log leaves them unparsed.
_UNREAD = _PASSIVE - SESSION_KINDS
_UNREAD_SPILLED = _UNREAD | {"durable"}  # a spilled log's `durable_labels` say which snapshot is final (a stub has no label)
_INDEXED, _BY_SESSION, _READ = 0, 1, 2  # what `walk_log` does with a kind's records besides indexing them


def _role(kind: str) -> int:
    if kind not in _PASSIVE:
        return _READ
    return _BY_SESSION if kind in SESSION_KINDS else _INDEXED


def walk_log(records: Sequence[Obs]) -> Walked:
    """Read the log once, in order (a spilled log streams from its file)."""
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
    held_commands: list[HeldCommand] = []
    deliveries: list[Delivery] = []  # see `_delivered`
    handed: dict[int, Turn | HeldCommand] = {}  # what the last restart (record `handed_at`) delivered, by arrival record
    handed_at = -1
    stopped: list[Downtime] = []
    changes: list[PolicyChange] = []
    indexes = _index_arrays(records)
    by_kind: dict[str, array[int]] = defaultdict(indexes)
    by_session: dict[tuple[str, str], array[int]] = defaultdict(indexes)
    down_since: int | None = None
    failure = None
    final_stop = None
    final_index = -1
    # Chat and session names, one copy each: a record read back from a spilled log brings
    # its own copy of every string, and a turn keeps three.
    names: dict[str | None, str | None] = {}
    # A spilled log knows its snapshots' labels: the walk leaves them unread (the final one is every row).
    labels: dict[int, object] | None = getattr(records, "durable_labels", None)
    # kind -> its index's append, and what the walk does with its records: _INDEXED (nothing
    # else), _BY_SESSION (indexed by session too) or _READ (its case below). Looked up once a
    # record, not tested against the sets of kinds.
    appenders: dict[str, tuple[Callable[[int], None], int]] = {}
    unanswering: dict[str, list[int]] = {}  # see `Walked`
    acked: dict[str, list[Turn]] = defaultdict(list)  # see `Walked`
    for index, r in _read(records, _UNREAD if labels is None else _UNREAD_SPILLED):
        kind = r.kind
        try:
            add, role = appenders[kind]
        except KeyError:  # the kind's first record (a try costs nothing until it raises: no test a record)
            add, role = appenders[kind] = (by_kind[kind].append, _role(kind))
        add(index)
        if role == _INDEXED:
            continue
        if role == _BY_SESSION:
            if r.session is not None:
                by_session[(kind, r.session)].append(index)
            continue
        # The kinds of every turn first: an LLM request and a reply (the chain of tests is per record).
        if kind == "llm_request":
            turn = turns.get(r.turns[0]) if r.turns else None
            if turn is not None:
                if turn.request_index < 0:
                    turn.request_t, turn.request_session, turn.request_index = r.t, names.setdefault(r.session, r.session), index
                    if turn.reply_t == ABSENT:  # its session is its request's until it is acked
                        turn.session = turn.request_session
                if turn.reply_t == ABSENT:  # not acked: a gateway that interrupts and asks again is answered at the last ask
                    turn.asked = r.t
        elif kind == "reply":
            turn = turns.get(r.turns[0]) if r.turns else None
            if turn is not None:
                turn.replies += 1
                if r.chat != turn.chat or ("answers" in r.detail and turn.id not in r.detail["answers"]):
                    unanswering.setdefault(turn.id, []).append(index)  # another chat's outbox, or no answer in it
                if turn.reply_t == ABSENT:  # not acked
                    session = names.setdefault(r.session, r.session)
                    turn.reply_t, turn.reply_session, turn.reply_index = r.t, session, index
                    turn.session = session
                    if session:
                        acked[session].append(turn)  # in reply order: the log's
        elif kind in ("message", "delegate"):
            chat = r.chat or ""
            detail = r.detail
            # (id, chat, arrival, index, delegate, muted): positional, a turn's keywords cost a third of its making
            turn = Turn(r.turns[0], names.setdefault(chat, chat), r.t, index, kind == "delegate", bool(detail.get("muted")))
            turns[turn.id] = turn
            if detail.get("queued"):
                turn.held = True
                held.append(turn)
        elif kind == "command":
            if r.detail.get("queued"):
                held_commands.append(HeldCommand(r.chat or "", index, r.detail.get("command")))
            else:
                commands[r.chat or ""].append(new_command((r.t, index, r.detail.get("command"), index)))
        elif kind == "restart":
            if r.detail.get("config") is not None:  # the restart changed the configuration (sim.scenario.ConfigChange)
                changed = config_from_document(r.detail.get("config")).with_default(config.reset)
                changes.append(PolicyChange(down_since if down_since is not None else r.t, changed, index))
            for turn in held:
                turn.arrival = r.t
            if held_commands:
                deliveries.append(Delivery(index, r.t, list(held), list(held_commands)))
            handed, handed_at = {item.index: item for item in (*held, *held_commands)}, index
            held.clear()
            held_commands.clear()
            if down_since is not None:
                stopped.append(Downtime(down_since, r.t))
                down_since = None
        elif kind in ("sigterm", "crash"):
            if (still := r.detail.get("held")) and handed:  # died while handed them: held until the next restart
                _hold_again(still, handed, handed_at, held, held_commands, deliveries)
            if r.detail.get("final"):
                final_stop = r.t
            elif down_since is None:
                down_since = r.t
        elif kind == "durable" and r.detail.get("label") == "final":
            final_index = index
        elif kind == "error":
            failure = r
    if labels is not None:
        final_index = max((index for index, label in labels.items() if label == "final"), default=-1)
    if down_since is not None:
        stopped.append(Downtime(down_since, NEVER))
    for delivery in deliveries:
        for chat, command in _delivered(delivery):
            commands[chat].append(command)
    view = LogView(records=records, name=head.d("name"), zone=zone, config=config,
                   chats=head.d("chats") or {}, profile=head.d("profile") or {}, final_stop=final_stop,
                   final_index=final_index, by_kind=dict(by_kind), by_session=dict(by_session), changes=changes)
    return Walked(view, turns, commands, failure, stopped, dict(acked), unanswering)


def _hold_again(still: list[int], handed: dict[int, Turn | HeldCommand], restart: int, held: list[Turn],
                held_commands: list[HeldCommand], deliveries: list[Delivery]) -> None:
    """A crash point fired while the restart step (record `restart`) handed the gateway what
    the platform held: those not handed yet (their arrival records, `still`, as the crash
    record lists them; a part of a log judged in parts knows only its own) are held until the
    next restart, and that restart delivered only the others."""
    again = [handed.pop(index) for index in still if index in handed]
    if not again:
        return
    held += [item for item in again if isinstance(item, Turn)]
    held_commands += [item for item in again if isinstance(item, HeldCommand)]
    if deliveries and deliveries[-1].restart == restart:
        last = deliveries.pop()
        if kept := [command for command in last.held if command.index in handed]:
            deliveries.append(Delivery(restart, last.t, [turn for turn in last.turns if turn.index in handed], kept))


def _read(records: Sequence[Obs], unread: frozenset[str]) -> Iterable[tuple[int, Obs]]:
    """(index, record) in order; where the walk reads only the kind and the log is spilled, a
    stub of the kind alone (its file knows each line's kind: `SpilledRecords.walk`). One part
    of a log judged in parts yields its own records and those every part reads (`LogPart.walk`)."""
    walk = getattr(records, "walk", None)
    return enumerate(records if walk is None else walk(unread)) if not isinstance(records, LogPart) else records.walk(unread)


def _delivered(delivery: Delivery) -> Iterator[tuple[str, CommandAt]]:
    """Where the commands held while the gateway was down take their place in the log. The
    platform delivers what it held at the restart, in arrival order, each chat's turns one at
    a time (a turn waits behind the one in flight; `/stop` abandons that one and the next
    starts). A command logs nothing when it is delivered, so its place is just after the
    request of the turn in flight at that moment (the restart, if none was): a held `/stop`
    abandons the turn it found running, not one its arrival record precedes."""
    pending = sorted([(turn.index, turn) for turn in delivery.turns if not turn.delegate and turn.request is not None]
                     + [(held.index, held) for held in delivery.held], key=lambda item: item[0])
    running: dict[str, Turn] = {}
    waiting: dict[str, list[Turn]] = defaultdict(list)
    for arrival, item in pending:
        if isinstance(item, Turn):
            if item.chat in running:
                waiting[item.chat].append(item)
            else:
                running[item.chat] = item
            continue
        chat, name = item.chat, item.name
        now = running.get(chat)
        yield chat, CommandAt(delivery.t, delivery.restart if now is None else now.request_index + 1, name, arrival)
        if name == "/stop" and now is not None:
            del running[chat]
            if waiting[chat]:
                running[chat] = waiting[chat].pop(0)
