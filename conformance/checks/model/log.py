"""The log as the oracle reads it: the records, their indexes by kind and session, the
configuration in force when. What the building of segments needs, and the checks after it."""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from conformance.checks.model.facts import NEVER, SESSION_KINDS, Expiry, PolicyChange, expiry_instant, time_text
from conformance.observations import Obs
from sim.scenario import GatewayConfig, ResetPolicy


@dataclass(slots=True, kw_only=True)
class LogView:
    records: Sequence[Obs]  # a list, or a spilled log read back from its file (conformance.harness.spill)
    name: str
    zone: ZoneInfo
    config: GatewayConfig
    chats: dict[str, dict[str, Any]]
    profile: dict[str, Any]
    final_stop: int | None
    final_index: int = -1  # the final durable snapshot's record (`final`), or -1
    # Record indexes, ascending, as 8-byte arrays (a list of ints costs 36 bytes an index).
    by_kind: dict[str, array[int]] = field(default_factory=dict, repr=False)
    by_session: dict[tuple[str, str], array[int]] = field(default_factory=dict, repr=False)  # (kind, session), SESSION_KINDS
    # The configurations restarts changed to: from the stop before the restart (a down gateway
    # fires nothing; the restarted one judges its downtime by the configuration it came back
    # with). Empty: `config` throughout.
    changes: list[PolicyChange] = field(default_factory=list, repr=False)
    # The declared finalization latency, never longer than quiescence allows past the last
    # boundary (`GatewayConfig.settle`): what the harness cannot wait for, it cannot excuse (so
    # I9's reply bound and I7's sweep period). A gateway that declared a year owed no end of a
    # session expired by its policy; now every boundary the run reaches is owed by its end.
    latency: int = field(init=False, repr=False)
    sweep_interval: int = field(init=False, repr=False)  # I7's slack, capped at the horizon likewise
    # How long after the chat could serve a message its reply may take, in ms (I9's bound): as
    # declared (`reply_within`, default the latency plus the scenario's turn latency), never
    # longer than quiescence waits (`GatewayConfig.horizon`).
    reply_within: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.latency = min(int(self.profile.get("latency", 0)), self.config.settle())
        self.sweep_interval = self.config.reap_slack(int(self.profile.get("sweep_interval", 0)))
        declared = self.profile.get("reply_within")
        within = int(declared) if declared is not None else self.latency + self.config.turn_latency
        self.reply_within = min(within, self.config.horizon())

    # -- rendering --------------------------------------------------------------------

    def at(self, t: int | None) -> str:
        """A virtual time as a person reads it, in the scenario's zone (to the second)."""
        return time_text(t, self.zone, self.records[0].t if self.records else t)

    # -- the configuration in force -----------------------------------------------------

    def policy(self, chat: str, t: int | None = None) -> ResetPolicy:
        """The chat's reset policy in force at `t` (None: the scenario's own, before any change)."""
        config = self.config
        for since, changed, _index in self.changes:
            if t is None or since > t:
                break
            config = changed
        info = self.chats.get(chat, {})
        return config.policy_for(info.get("platform", "telegram"), info.get("chat_type", "dm"))

    def policies(self, chat: str) -> list[ResetPolicy]:
        """Every reset policy the chat is under in the run, in order."""
        return [self.policy(chat), *(self.policy(chat, change.since) for change in self.changes)]

    def expiry(self, chat: str, anchor: int, last_user: int, asked: int = NEVER,
               kept: Callable[[Expiry, PolicyChange], bool] | None = None) -> Expiry | None:
        """The first instant the chat's entry is past a boundary of the policy in force then,
        if no user message comes, as seen at record `asked`: under each policy in force by then,
        from when it is in force (a policy that finds the entry already past when it comes in
        force ends it at that instant). A boundary a policy finds before the stop that ends its
        time, or at the stop's own instant, counts after the restart only if `kept(expiry,
        change)` says so (None: always); else the policies after it judge the entry again."""
        if not self.changes:
            return expiry_instant(self.policy(chat), self.zone, anchor, last_user)
        starts = [0, *(change.since for change in self.changes)]
        for k, since in enumerate(starts):
            last = k + 1 == len(starts) or asked < self.changes[k].index  # the policy in force at `asked`
            until = NEVER if last else starts[k + 1]
            expiry = expiry_instant(self.policy(chat, since if k else None), self.zone, anchor, last_user)
            # The stop's own instant is the old policy's too (what came before the stop in it: a
            # message, a tick, an end a crash point cut short); `kept` says if its boundary stands.
            if expiry is not None and max(expiry.at, since) <= until:
                found = Expiry(max(expiry.at, since), expiry.reason)
                if last or kept is None or kept(found, self.changes[k]):
                    return found
            if last:
                break
        return None

    def expiry_of(self, chat: str) -> Callable[[int, int], Expiry | None]:
        """`expiry` for one chat, (anchor, last_user) -> its expiry: the chat's policy looked up
        once where no restart changed it (the segments ask it per turn: a partial of positional
        arguments, no closure's frame a call; one binding the zone by keyword copied its keywords
        per call)."""
        if self.changes:
            return partial(self.expiry, chat)
        return partial(expiry_instant, self.policy(chat), self.zone)

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

    # -- looking records up -------------------------------------------------------------

    def of(self, *kinds: str) -> Iterator[tuple[int, Obs]]:
        """Records of these kinds, in log order, with their indexes (streamed: a spilled log
        reads them from its file in one forward pass, and none is kept)."""
        lists = [self.by_kind.get(kind, ()) for kind in kinds]
        indexes = lists[0] if len(lists) == 1 else list(heapq.merge(*lists))
        pick = getattr(self.records, "pick", None)
        return zip(indexes, pick(indexes) if pick is not None else map(self.records.__getitem__, indexes), strict=True)

    def of_session(self, kind: str, session: str, lo: int = 0, hi: int = NEVER) -> list[tuple[int, Obs]]:
        """Records of one kind (one of SESSION_KINDS) about one session, with index in [lo, hi)."""
        indexes = self.by_session.get((kind, session))
        if indexes is None:  # asked of most sessions for most kinds (a switch, a reset), and never logged
            _session_kind(kind)
            return []
        # Asked a few hundred times a generated seed, mostly of a range with one record or none:
        # no bisect for an open end, no list built for none, and a loop (a comprehension's own
        # function cost more than the loop, for a record or two).
        first = bisect_left(indexes, lo) if lo > 0 else 0
        end = bisect_left(indexes, hi) if hi < NEVER else len(indexes)
        if first >= end:
            return []
        records = self.records
        found: list[tuple[int, Obs]] = []
        for i in indexes[first:end]:
            found.append((i, records[i]))
        return found

    def first_of_session(self, kind: str, session: str, lo: int = 0, hi: int = NEVER) -> int | None:
        """The index of `of_session`'s first record, if any: asked where only the earliest
        matters (no list made, no record read)."""
        indexes = self.by_session.get((kind, session))
        if indexes is None:
            _session_kind(kind)
            return None
        k = bisect_left(indexes, lo) if lo > 0 else 0
        return indexes[k] if k < len(indexes) and indexes[k] < hi else None

    @property
    def final(self) -> Obs | None:
        """The final durable snapshot, read when asked: it holds every stored row, the largest
        record of a long run, which the model does not keep."""
        return self.records[self.final_index] if self.final_index >= 0 else None


def _session_kind(kind: str) -> None:
    """Asking `of_session` of a kind not indexed by session is a check's bug: said where the
    index has no entry (so on that path only, as such a kind never has one)."""
    if kind not in SESSION_KINDS:
        raise ValueError(f"records of kind {kind!r} are not indexed by session")
