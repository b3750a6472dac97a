"""The recorded doubles the harness hands a gateway: the fake LLM, the platform's outbox, memory
backends and sessiongate's own provider, the plugin-hook bus. Every call they take lands in the log.

What a gateway hands them reaches the log as plain values, as over the wire: a str subclass as
the str it holds (so no method of the gateway's runs when the checks read the log), anything
else of the wrong type a `BadHandover` raised into the gateway's call, its error at that step."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

from conformance.harness.spill import ObservationLog
from conformance.observations import _REPLY_WORD, TURN_ID, halves, halves_in, not_whole, read_call, reply_text, turn_ids
from sessiongate import SessiongateError
from sim.engine import Engine
from sim.scenario import Usage

SHOWN = 80  # characters of a bad value quoted in an error
NO_RECALL: tuple[str, ...] = ()  # `FakeLLM.request`'s default `recall`: found by identity, no call


class BadHandover(SessiongateError, TypeError):
    """A gateway handed the harness a value of the wrong type; the message names the call and argument."""


def shown(value: object) -> str:
    """`repr(value)`, cut to SHOWN characters, for an error about it (a repr that raises: `?`)."""
    try:
        text = repr(value)
    except Exception:
        text = "?"
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def bad_handover(call: str, name: str, expected: str, value: object) -> BadHandover:
    return BadHandover(f"bad value handed to {call}: {name}: expected {expected}, got {type(value).__name__} {shown(value)}")


def plain_str(call: str, name: str, value: object) -> str:
    """`value` as an exact str (a subclass's characters), or `BadHandover`."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)  # a copy of exact type: none of the subclass's methods run
    raise bad_handover(call, name, "a str", value)


def plain_strs(call: str, name: str, values: Iterable[object]) -> list[str]:
    """Each item as `plain_str`, in a fresh list."""
    out = list(values)
    for i, value in enumerate(out):
        if type(value) is not str:
            out[i] = plain_str(call, f"{name}[{i}]", value)
    return out


def plain_detail(call: str, name: str, value: Any, depth: int = 0) -> Any:
    """A note's detail as JSON's values (str, int, float, bool, None, lists, str-keyed dicts), or
    `BadHandover`: timelines and reports print it, and a report must never fail to be written."""
    kind = type(value)
    if value is None or kind in (int, float, bool):
        return value
    if isinstance(value, str):
        return plain_str(call, name, value)
    if depth < 8 and isinstance(value, (list, tuple)):
        return [plain_detail(call, f"{name}[{i}]", item, depth + 1) for i, item in enumerate(value)]
    if depth < 8 and isinstance(value, dict):
        return {plain_str(call, f"{name} key", key): plain_detail(call, f"{name}[{key!r}]", item, depth + 1)
                for key, item in value.items()}
    raise bad_handover(call, name, "a str, number, bool, None, list or dict (at most 8 deep)", value)


class BackendUnavailable(RuntimeError):
    """A memory backend refused a call (an injected `backend_fail` fault)."""


class BackendBusy(BackendUnavailable):
    """A slow memory backend (an injected `backend_slow` fault) has not completed the call yet:
    the same call made again at `ready_at` or later completes. A synchronous call cannot take
    virtual time, so the backend says when it will be done and the waiting is the gateway's;
    a gateway that knows only failures treats it as one."""

    def __init__(self, message: str, ready_at: int) -> None:
        super().__init__(message)
        self.ready_at = ready_at


class CrashPointFired(BaseException):
    """The process dies at a crash point (harness-private). Raised by `Harness.crash_point`,
    and by `Platform` at the harness's own `reply-sent`, to unwind the gateway's step; a
    BaseException, like SystemExit, so an `except Exception` in the gateway does not swallow
    it. A gateway must let it through: code of a dead process must not run on (the runner
    reports a gateway that catches it as an error)."""

    def __init__(self, point: str) -> None:
        super().__init__(point)
        self.point = point


class FakeLLM:
    """Answers every request after the configured latency with '[<turn>] reply', <turn> the
    newest turn id of the prompt's last message.

    Each answer also reports token usage (`sim.scenario.Usage`): the credited turn's
    message says what (`usage:`), else the scenario's config; 'small' by default. A gateway
    that reads usage asks `usage_of(request_id)` when the answer arrives; the `llm_request`
    record names any usage other than 'small', so the log says what each answer reported."""

    def __init__(self, log: ObservationLog, engine: Engine, latency: int, deliver: Callable[[str, str], None],
                 usage: Usage = "small", usage_by_turn: dict[str, Usage] | None = None) -> None:
        self._log, self._engine, self._latency, self._deliver = log, engine, latency, deliver
        self._count = 0
        self._usage, self._usage_by_turn = usage, usage_by_turn or {}
        self._reported: dict[str, Usage] = {}  # request id -> its answer's usage, other than 'small', until answered
        self.epoch = 0  # bumped when the gateway process dies: replies to the dead one are lost

    def request(self, chat: str, session: str, prompt: Sequence[str], *, recall: Sequence[str] = NO_RECALL) -> str:
        """Send the prompt (the session's texts, last one the user's); returns a request id.

        `recall`: texts the gateway adds from its memory (what its providers hold of the chat's
        ended sessions), given to the LLM beside the conversation. The gateway's word that they
        are memory, not the session's history: none is read (no turn is credited from one, none
        is `context`, I6); the record counts them (`recall`, left out when none)."""
        if isinstance(prompt, (str, bytes)):  # one text, whose last character would be read as the user's message
            raise bad_handover("llm.request", "prompt", "a list of texts, the user's message last", prompt)
        size = len(prompt)  # once: a gateway's own sequence may count in Python
        last = prompt[-1] if size else ""  # the message: the turn, and its first text, the context, are what is read
        if type(chat) is not str or type(session) is not str or type(last) is not str:  # the common case: no call
            chat, session = plain_str("llm.request", "chat", chat), plain_str("llm.request", "session", session)
            last = plain_str("llm.request", "prompt[-1]", last)
        if recall is not NO_RECALL:  # the common case: no call
            recall = _recalled(recall)
        self._count += 1
        request_id = f"r{self._count}"
        # The reply answers the newest turn of the last message, the one whose arrival made the
        # gateway ask; one that folds unanswered messages into that prompt ("[t3] …\n[t5] …")
        # answers them with it too. The record lists every turn carried, the credited one first.
        carried = turn_ids(last)
        if len(carried) > 1:  # a prompt that folds unanswered messages: each turn once, the newest credited first
            carried = tuple(dict.fromkeys(carried))
            credited = (*carried[-1:], *carried[:-1])
        else:
            credited = carried
        turn = carried[-1] if carried else None
        usage = self._usage_by_turn.get(turn, self._usage) if turn else self._usage
        context = None
        if size > 1:  # the oldest turn of its history: the first text's, mostly (one look, no call)
            head = prompt[0]
            if type(head) is str and (found := _search_tag(head)) is not None:
                context = found[1]
                if context in carried:
                    context = None
            else:
                context = _context(prompt, carried)
        if usage == "small" and not recall:  # defaults are left out of the record: logs from before read alike
            if context is None:
                self._log.add("llm_request", chat=chat, session=session, turns=credited, request=request_id)
            else:
                self._log.add("llm_request", chat=chat, session=session, turns=credited, request=request_id, context=context)
        else:
            extra: dict[str, Any] = {}
            if usage != "small":
                self._reported[request_id] = usage
                extra["usage"] = usage
            if context is not None:
                extra["context"] = context
            if recall:
                extra["recall"] = len(recall)
            self._log.add("llm_request", chat=chat, session=session, turns=credited, request=request_id, **extra)
        self._engine.call_later(self._latency, self._reply, self.epoch, request_id, turn)
        return request_id

    def usage_of(self, request_id: str) -> Usage:
        """What the answer to `request_id` reports about token usage (see `sim.scenario.Usage`)."""
        return self._reported.get(plain_str("llm.usage_of", "request_id", request_id), "small")

    def _reply(self, epoch: int, request_id: str, turn: str | None) -> None:
        try:
            if epoch == self.epoch:
                self._deliver(request_id, reply_text(turn) if turn else "reply")
        finally:
            self._reported.pop(request_id, None)


_search_tag = TURN_ID.search
CONTEXT_READ = 8  # texts of a prompt's history read for its first turn (a system prompt or two may come first)


def _context(prompt: Sequence[str], own: Sequence[str]) -> str | None:
    """The first turn a prompt's history carries (its texts before the last, read from the first,
    at most `CONTEXT_READ` of them), if not one of the request's own: the oldest turn of the
    conversation the LLM is asked in, which I6 holds to the request's session. Bounded: a
    request costs no more for a longer session."""
    for index in range(min(len(prompt) - 1, CONTEXT_READ)):
        text = prompt[index]
        if type(text) is str and (found := TURN_ID.search(text)) is not None:
            first = found.group(1)
            return None if first in own else first
    return None


def _recalled(recall: object) -> list[str]:
    """A request's `recall` as a plain list (`plain_strs`: counted without the gateway's code), if
    it is a list of str as `prompt` is, else `BadHandover`. The texts themselves are not read."""
    if type(recall) not in (list, tuple) and (isinstance(recall, (str, bytes, bytearray)) or not isinstance(recall, Sequence)):
        raise bad_handover("llm.request", "recall", "a list of texts (what the gateway adds from memory)", recall)
    return plain_strs("llm.request", "recall", recall)


class Platform:
    """The chat platform's outbox: a reply delivered here acknowledges its turn.

    `after_reply`, when set (`conformance.adapter.HARNESS_POINTS`), is asked once the reply is
    in the log (`CrashPoints.hit`): the harness's own crash point `reply-sent`, where the
    process may die with the turn acknowledged and nothing after the reply done."""

    def __init__(self, log: ObservationLog) -> None:
        self._log = log
        self.after_reply: Callable[[str], bool] | None = None

    def send_reply(self, chat: str, session: str, text: str) -> None:
        if type(chat) is not str or type(session) is not str or type(text) is not str:
            call = "platform.send_reply"
            chat, session, text = plain_str(call, "chat", chat), plain_str(call, "session", session), plain_str(call, "text", text)
        turns = turn_ids(text)
        if len(turns) == 1 and text == reply_text(turns[0]):  # the fake LLM's answer as it came: no second scan
            self._log.add("reply", chat=chat, session=session, turns=turns)
        else:
            answers = halves((text,))[1]
            if answers == tuple(dict.fromkeys(turns)):  # the common case: the text is the answer of each turn it names
                self._log.add("reply", chat=chat, session=session, turns=turns)
            else:  # some turn named only by a copy of its message (an echo, a stripped tag): `answers` says which are
                self._log.add("reply", chat=chat, session=session, turns=turns, answers=list(answers))
        if self.after_reply is not None and self.after_reply("reply-sent"):
            raise CrashPointFired("reply-sent")


class MemoryBackend:
    """Where a memory provider ships turns; 'ingested' is counted here."""

    def __init__(self, name: str, log: ObservationLog, now: Callable[[], int], said: Mapping[str, str] | None = None) -> None:
        self.name, self._log, self._now = name, log, now
        self.said: Mapping[str, str] = {} if said is None else said  # turn -> its message where not 'hello' (`not_whole`)
        self.down_until = -1
        self.slow_until, self.slow_delay = -1, 0
        self._ready: dict[tuple[str, str], int] = {}  # (session, turn) -> when its slow call completes

        self._keys: set[str] = set()  # idempotency keys taken: the backend outlives the gateway's crashes

    def ingest(self, session: str, texts: Sequence[str], keys: Sequence[str] | None = None) -> None:
        """Store the texts of turns of `session`. Raises BackendUnavailable while failing,
        BackendBusy while a slow call is not complete.

        The record names the turns whose user message the texts carry (`turns`) and those whose
        reply they carry (`replies`, `observations.halves`): a turn ingested is both halves. A
        user message is carried whole or not at all: one whose tag came without what the user
        said is no half of its turn, and the record lists it apart (`cut`, `not_whole`).
        `keys` (one per text, optional): idempotency keys, as a document id is to Hindsight's
        retain; a text whose key the backend already took is acknowledged and not stored again
        (a re-ship after a crash between shipping and saving the watermark is no double ingest).
        A call whose every text was a repeat is logged `ingest_repeated`."""
        if type(session) is not str or type(texts) is not list or set(map(type, texts)) - {str}:
            call = f"backends[{self.name!r}].ingest"
            session, texts = plain_str(call, "session", session), plain_strs(call, "texts", texts)
        if keys is not None and (type(keys) is not list or set(map(type, keys)) - {str}):
            keys = plain_strs(f"backends[{self.name!r}].ingest", "keys", keys)
        taken: Sequence[str] = ()
        down = self._now() < self.down_until
        if keys is not None:
            if len(keys) != len(texts):
                raise ValueError(f"ingest: {len(keys)} keys for {len(texts)} texts")
            if not down and self._keys.isdisjoint(keys):  # the usual call: every text new (found in C)
                taken = keys
            elif not down:
                fresh = [i for i, key in enumerate(keys) if key not in self._keys]
                if len(fresh) < len(texts):
                    repeated = [texts[i] for i in range(len(texts)) if i not in set(fresh)]
                    users, replies = halves(repeated)
                    self._log.add("ingest_repeated", session=session, turns=users, backend=self.name, replies=list(replies))
                if not fresh:
                    return
                texts, taken = [texts[i] for i in fresh], [keys[i] for i in fresh]
        joined = "\n".join(texts)
        users, replies, apart = read_call(joined)
        cut = not_whole(joined, users, self.said) if users else None
        if cut:
            users = tuple(t for t in users if t not in cut)
        if down:
            self._log.add("ingest_failed", session=session, turns=users, backend=self.name, replies=list(replies))
            raise BackendUnavailable(f"memory backend {self.name!r} is unavailable")
        self._complete_slow(session, users, replies)
        if not cut and not apart:  # the usual call: no keywords built
            self._log.add("ingest", session=session, turns=users, backend=self.name, replies=list(replies))
            self._keys.update(taken)
            return
        extra: dict[str, Any] = {}
        if cut:
            extra["cut"] = cut
        if apart:
            extra["apart"] = apart
        self._log.add("ingest", session=session, turns=users, backend=self.name, replies=list(replies), **extra)
        self._keys.update(taken)  # only once stored: a busy or failed call is taken when it is made again

    def _complete_slow(self, session: str, users: Sequence[str], replies: Sequence[str]) -> None:
        """A turn first sent while the backend is slow completes `slow_delay` after that first
        call; a call completes when all its turns have (else BackendBusy, logged `ingest_busy`)."""
        now = self._now()
        if now >= self.slow_until and not self._ready:  # never slow, nor slow now: every call completes at once
            return
        ready = now
        for turn in dict.fromkeys((*users, *replies)):
            key = (session, turn)
            if key not in self._ready and now < self.slow_until:
                self._ready[key] = now + self.slow_delay
            ready = max(ready, self._ready.get(key, now))
        if ready > now:
            self._log.add("ingest_busy", session=session, turns=users, backend=self.name, replies=list(replies), ready=ready)
            raise BackendBusy(f"memory backend {self.name!r} is slow: the call completes at {ready}", ready)


class RecordingProvider:
    """sessiongate's own memory provider: records every hook and ships each turn at once.

    Every gateway loads it beside its own providers; it is how the checks see `sync_turn`,
    `on_session_end`, `on_session_switch` and `shutdown` in the order the gateway calls them.
    """

    name = "recorder"

    def __init__(self, log: ObservationLog, backend: MemoryBackend) -> None:
        self._log, self._backend = log, backend

    def sync_turn(self, session: str, user: str, assistant: str) -> None:
        if type(session) is not str or type(user) is not str or type(assistant) is not str:
            call = "recorder.sync_turn"
            session, user = plain_str(call, "session", session), plain_str(call, "user", user)
            assistant = plain_str(call, "assistant", assistant)
        if assistant.endswith(_REPLY_WORD) or not halves_in(user)[1]:  # the usual call: the answer where it belongs
            self._log.add("sync_turn", session=session, turns=turn_ids(user))
        else:  # its `user` is a reply: the arguments are the wrong way round
            self._log.add("sync_turn", session=session, turns=turn_ids(user), swapped=True)
        self._backend.ingest(session, [user, assistant])

    def on_session_end(self, session: str, transcript: Sequence[tuple[str, str]]) -> None:
        """`turns`: the turns whose user message it carries; `replies`: those whose reply it carries."""
        pairs = list(transcript)
        if type(session) is not str or set(map(type, pairs)) - {tuple} or set(map(len, pairs)) - {2} \
                or set(map(type, chain.from_iterable(pairs))) - {str}:  # the common case checked in C
            call = "recorder.on_session_end"
            session = plain_str(call, "session", session)
            for i, pair in enumerate(pairs):
                role, content = pair
                pairs[i] = (plain_str(call, f"transcript[{i}] role", role), plain_str(call, f"transcript[{i}] content", content))
        turns, replies, apart, cut = _transcript_turns(pairs, self._backend.said)
        extra: dict[str, Any] = {"apart": apart} if apart else {}  # left out when none: logs from before read alike
        if cut:
            extra["cut"] = cut
        self._log.add("on_session_end", session=session, turns=turns, messages=len(pairs), replies=replies, **extra)

    def on_session_switch(self, old: str | None, new: str) -> None:
        if type(new) is not str or not (old is None or type(old) is str):
            call = "recorder.on_session_switch"
            new, old = plain_str(call, "new", new), None if old is None else plain_str(call, "old", old)
        self._log.add("on_session_switch", session=new, previous=old)

    def shutdown(self) -> None:
        self._log.add("memory_shutdown")


def _transcript_turns(pairs: Sequence[tuple[str, str]], said: Mapping[str, str]
                      ) -> tuple[list[str], list[str], list[str], list[str]]:
    """(the turns the user messages of a transcript carry, those its assistant messages carry,
    those apart, those cut), each message's tags read once. A folded message carries two. A turn
    is apart when its reply does not follow its own message: the last user message before an
    assistant message carrying a turn's tag must carry that tag too (messages of other roles, a
    tool's, between them are no matter). A turn is cut when its user message carries its tag
    without what the user said (`not_whole`): it is not among the turns carried."""
    turns: list[str] = []
    replies: list[str] = []
    apart: dict[str, None] = {}
    cut: dict[str, None] = {}
    asking: tuple[str, ...] = ()
    for role, content in pairs:
        if role == "user":
            asking = turn_ids(content)
            if asking and (lost := not_whole(content, asking, said)):
                cut.update(dict.fromkeys(lost))
                turns += [t for t in asking if t not in lost]
            else:
                turns += asking
        elif role == "assistant":
            answered = turn_ids(content)
            replies += answered
            for turn in answered:
                if turn not in asking:
                    apart[turn] = None
    return turns, replies, list(apart), list(cut)


class HookBus:
    """The plugin-hook bus: records `on_session_finalize` and `on_session_reset`."""

    def __init__(self, log: ObservationLog) -> None:
        self._log = log

    def on_session_finalize(self, session: str, reason: str) -> None:
        if type(session) is not str or type(reason) is not str:
            call = "hooks.on_session_finalize"
            session, reason = plain_str(call, "session", session), plain_str(call, "reason", reason)
        self._log.add("on_session_finalize", session=session, reason=reason)

    def on_session_reset(self, session: str) -> None:
        if type(session) is not str:
            session = plain_str("hooks.on_session_reset", "session", session)
        self._log.add("on_session_reset", session=session)
