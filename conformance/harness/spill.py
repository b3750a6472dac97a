"""The observation log a run appends to, kept in a temporary file past a size: how a long run's
memory stays bounded.

Past a threshold (`SPILL_AT` records) the log writes its records out and keeps
only each record's offset and kind. `SpilledRecords` reads them back as a sequence:
iteration streams the file (as often as a reader likes; the checks make several passes),
`pick` streams chosen records, and indexing reads one. Records are stored with `marshal`
(the fields as a tuple), which reads back in a fraction of a JSON parse; `log_text()` renders
them as for any log, so the log's bytes are the same whether it spilled or not.
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, compress
from typing import Any, overload

from conformance.observations import Obs, Step, log_text

BLOCK = 1 << 20  # bytes per read while streaming


def _dump(record: Obs) -> bytes | _Streamed:
    fields = (record.t, record.step, record.kind, record.chat, record.session, record.turns, record.detail)
    try:
        return _dump_fields(fields)
    except ValueError:  # a value marshal does not take (a str or int subclass): as its JSON reads back
        plain = Obs.from_json(record.to_json())
        return _dump_fields((plain.t, plain.step, plain.kind, plain.chat, plain.session, plain.turns, plain.detail))


def _dump_fields(fields: tuple[Any, ...]) -> bytes | _Streamed:
    """A record's fields, marshalled; a `durable` snapshot's sessions each by itself (an eighth
    field: (id, blob) pairs), so a reader loads one session at a time (`SpilledSessions`)."""
    detail = fields[6]
    sessions = detail.get("sessions") if fields[2] == "durable" else None
    if type(sessions) is SpilledSessions:  # packed as made (`SpilledSessions.pack`): written as it is
        return _Streamed((*fields[:6], {**detail, "sessions": None}), sessions._blobs)
    if type(sessions) is dict:
        blobs = tuple((sid, marshal.dumps(body)) for sid, body in sessions.items())
    else:
        return marshal.dumps(fields)
    return marshal.dumps((*fields[:6], {**detail, "sessions": None}, blobs))


_TUPLE = b"("  # marshal's TYPE_TUPLE, then its length as a 4-byte little-endian int
_LENGTH = struct.Struct("<i")


class _Streamed:
    """A packed snapshot's record (a long run's final one: tens of MB), written a session at a
    time rather than joined into one bytes beside its sessions' blobs: the same tuple as
    `_dump_fields` makes of a dict's sessions, marshalled in pieces without back-references
    (marshal's version 2), so that the pieces laid end to end are one marshal stream."""

    __slots__ = ("_blobs", "_head", "_size", "fields")

    def __init__(self, fields: tuple[Any, ...], blobs: Mapping[str, bytes]) -> None:
        self.fields = fields  # the record's, its sessions None
        head = [_TUPLE, _LENGTH.pack(len(fields) + 1), *(marshal.dumps(field, 2) for field in fields),
                _TUPLE, _LENGTH.pack(len(blobs))]
        self._head = b"".join(head)
        self._blobs = blobs
        # Each pair: its tuple's type and length (5), the id marshalled, the blob's type and length (5), the blob.
        self._size = len(self._head) + sum(10 + len(marshal.dumps(sid, 2)) + len(blob) for sid, blob in blobs.items())

    def __len__(self) -> int:
        return self._size

    def pieces(self) -> Iterator[tuple[bytes, str, int]]:
        """The bytes to write in order, each with the session whose blob ends it and the blob's
        size ("" and 0: the head)."""
        yield self._head, "", 0
        for sid, blob in self._blobs.items():
            yield marshal.dumps((sid, blob), 2), sid, len(blob)


class _BlobsInFile(Mapping[str, bytes]):
    """A streamed snapshot's blobs where they lie in the log's file, read one when asked: a
    reader of one part's sessions, or of one session, does not load every row of the run (a
    10^6-event run's final snapshot is ≈ 45 MB of blobs, and each check of each part read it)."""

    __slots__ = ("_file", "_spans")

    def __init__(self, file: Any, spans: dict[str, tuple[int, int]]) -> None:
        self._file = file  # the log's file, kept open while a reader holds this
        self._spans = spans  # session -> (offset, size) of its blob

    def __getitem__(self, sid: str) -> bytes:
        offset, size = self._spans[sid]
        return os.pread(self._file.fileno(), size, offset)

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)

    def __contains__(self, sid: object) -> bool:
        return sid in self._spans

    def select(self, sessions: set[str]) -> _BlobsInFile:
        return _BlobsInFile(self._file, {sid: span for sid, span in self._spans.items() if sid in sessions})


def _load(data: bytes | memoryview) -> Obs:
    return _obs(marshal.loads(data))


def _obs(fields: tuple[Any, ...]) -> Obs:
    if len(fields) == 8:  # a snapshot, its sessions apart
        fields[6]["sessions"] = SpilledSessions(fields[7])
        fields = fields[:7]
    return _new_obs(Obs, fields)  # the seven fields as `_dump` wrote them: Obs's own __new__ has nothing to default


class SpilledSessions(Mapping[str, Any]):
    """A spilled snapshot's sessions: id -> its body ({"parent", "rows"}), each kept marshalled
    and loaded when read. A long run's final snapshot is every stored row (≈ 240 bytes a turn as
    lists); a check reads it session by session, so it holds one session's rows at a time.
    Reads as the dict it was (equal to it; its JSON is the dict's: `observations._encode`)."""

    __slots__ = ("_blobs",)

    def __init__(self, blobs: Iterable[tuple[str, bytes]] | _BlobsInFile) -> None:
        self._blobs: Mapping[str, bytes] = blobs if type(blobs) is _BlobsInFile else dict(blobs)

    def __reduce__(self) -> tuple[Any, ...]:
        return SpilledSessions, (list(self._blobs.items()),)  # another process gets the blobs, not the file

    @classmethod
    def pack(cls, bodies: Iterable[tuple[str, dict[str, Any]]]) -> SpilledSessions:
        """Sessions marshalled one at a time as they come (a long run's final snapshot is built
        so: its rows as lists were ≈ 240 bytes a turn beside the gateway's own copy)."""
        return cls((sid, marshal.dumps(body)) for sid, body in bodies)

    def __getitem__(self, sid: str) -> Any:
        return marshal.loads(self._blobs[sid])

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)

    def __contains__(self, sid: object) -> bool:
        return sid in self._blobs

    def __repr__(self) -> str:
        return f"SpilledSessions({len(self)} sessions)"

    def select(self, sessions: set[str]) -> SpilledSessions:
        """These sessions only (their blobs shared, not copied or read): one part's (`conformance.checks.parts`)."""
        blobs = self._blobs
        if type(blobs) is _BlobsInFile:
            return SpilledSessions(blobs.select(sessions))
        return SpilledSessions((sid, blob) for sid, blob in blobs.items() if sid in sessions)


class SpilledRecords(Sequence[Obs]):
    """Records in an unnamed temporary file (gone when this object is)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 -- lives as long as this object
        self._fd = self._file.fileno()
        # Byte offset of each record: 4 bytes each while the file is under 4 GiB (a 10^6-event
        # run writes ≈ 8 M records: "q" took 8 bytes each), 8 past it.
        self._starts = array("I" if array("I").itemsize == 4 else "q")
        self._end = 0  # bytes written
        self._kinds = bytearray()  # each record's kind, as its position in `_kind_names`
        self._kind_codes: dict[str, int] = {}
        self._kind_names: list[str] = []
        self._head: Obs | None = None  # record 0, which readers ask for often (the scenario)
        # Each `durable` record's label, by index: the final snapshot is every stored row (a long
        # run's largest record), and a reader after the label alone need not load it.
        self.durable_labels: dict[int, Any] = {}
        # A streamed snapshot (`_Streamed`) by index: its fields, and each session's blob's place
        # in the file. Read back with its sessions left in the file (`_BlobsInFile`).
        self._streamed: dict[int, tuple[tuple[Any, ...], dict[str, tuple[int, int]]]] = {}

    def extend(self, records: Iterable[Obs]) -> None:
        """Append records to the file (in order)."""
        # One loop a record (a long run writes millions): its kind's code, its label if it is a
        # snapshot, its bytes (a record that is not a snapshot: its own fields, as `_dump` would).
        # Kept aside until every record is dumped: a record that cannot be leaves the file as it was.
        codes, dumps = self._kind_codes, marshal.dumps
        kinds = bytearray()
        labels: dict[int, Any] = {}
        blobs: list[bytes | _Streamed] = []
        index = len(self._starts)
        for r in records:
            kind = r.kind
            code = codes.get(kind)
            if code is None:
                code = codes[kind] = len(self._kind_names)
                self._kind_names.append(kind)
            kinds.append(code)
            if kind == "durable":
                labels[index] = r.detail.get("label")
                blobs.append(_dump(r))
            else:
                try:
                    blobs.append(dumps(tuple(r)))
                except ValueError:  # a value marshal does not take
                    blobs.append(_dump(r))
            index += 1
        if not blobs:
            return
        self._kinds += kinds
        self.durable_labels.update(labels)
        if self._starts.typecode == "I" and self._end + sum(map(len, blobs)) >= 1 << 32:
            self._starts = array("q", self._starts)
        self._starts.extend(accumulate(map(len, blobs[:-1]), initial=self._end))
        # Joined, one write; a record past BLOCK bytes (a long run's final snapshot: tens of MB)
        # is written as it is, not copied into the join.
        pending: list[bytes] = []
        for index, blob in enumerate(blobs, len(self._starts) - len(blobs)):
            if type(blob) is _Streamed:
                self._write(b"".join(pending))
                pending = []
                start = self._end
                spans: dict[str, tuple[int, int]] = {}
                for piece, sid, size in blob.pieces():
                    self._write(piece)
                    if size:
                        spans[sid] = (self._end - size, size)
                assert self._end - start == len(blob), "a streamed record's size was miscounted"
                self._streamed[index] = (blob.fields, spans)
            elif len(blob) > BLOCK:
                self._write(b"".join(pending))
                pending = []
                self._write(blob)
            else:
                pending.append(blob)
        self._write(b"".join(pending))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # an unbuffered file may take part of it
            view = view[self._file.write(view):]
        self._end += len(data)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Obs: ...
    @overload
    def __getitem__(self, index: slice) -> list[Obs]: ...
    def __getitem__(self, index: int | slice) -> Obs | list[Obs]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index == 0 and self._head is not None:
            return self._head
        if index in self._streamed:
            return self._streamed_record(index)
        start = self._starts[index]  # IndexError past the end, as a list
        stop = self._starts[index + 1] if index + 1 < len(self._starts) else self._end
        record = _load(os.pread(self._fd, stop - start, start))
        if index == 0:
            self._head = record
        return record

    def __iter__(self) -> Iterator[Obs]:
        return self.pick(range(len(self)))

    def _streamed_record(self, index: int) -> Obs:
        """A streamed snapshot with its sessions left in the file (the blobs read one when asked)."""
        fields, spans = self._streamed[index]
        return Obs(*fields[:6], {**fields[6], "sessions": SpilledSessions(_BlobsInFile(self._file, spans))})

    def __reversed__(self) -> Iterator[Obs]:
        for index in range(len(self) - 1, -1, -1):
            yield self[index]

    def kinds(self) -> Iterator[str]:
        """Each record's kind, in order, without reading the file."""
        return map(self._kind_names.__getitem__, self._kinds)

    def pick(self, indexes: Iterable[int]) -> Iterator[Obs]:
        """The records at these ascending indexes, read forward in blocks: one read for many
        records instead of one each."""
        starts, end, last = self._starts, self._end, len(self._starts) - 1
        base = limit = 0  # the block read holds the file's bytes base..limit
        block = b""
        loads, new = marshal.loads, _new_obs
        for index in indexes:
            start = starts[index]
            stop = starts[index + 1] if index < last else end
            if stop > limit or start < base:
                if stop - start > BLOCK:  # read by itself, not kept as the block while its reader holds the record
                    yield self._streamed_record(index) if index in self._streamed else _load(os.pread(self._fd, stop - start, start))
                    continue
                base, block = start, os.pread(self._fd, BLOCK, start)
                limit = base + len(block)
            fields = loads(block[start - base:stop - base])  # `_load`, inlined: millions of records in a long run
            yield new(Obs, fields) if len(fields) == 7 else _obs(fields)

    def walk(self, unread: frozenset[str]) -> Iterator[Obs]:
        """The records in order; for one whose kind is in `unread`, not read, a stub of its kind
        alone (`Obs(0, 0, kind)`, one shared by every record of that kind)."""
        names = self._kind_names
        stubs = [Obs(0, 0, name) for name in names]
        read = self.kind_mask(frozenset(names) - unread)  # the records to read, found by C loops
        records = self.pick(compress(range(len(read)), read))
        for code, wanted in zip(self._kinds, read, strict=True):
            yield next(records) if wanted else stubs[code]

    def kind_mask(self, kinds: frozenset[str]) -> bytes:
        """A byte a record: 1 where its kind is one of `kinds` (a C loop over the kinds)."""
        names = self._kind_names
        return self._kinds.translate(bytes(int(code < len(names) and names[code] in kinds) for code in range(256)))

    def of_kinds(self, kinds: frozenset[str]) -> Iterator[tuple[int, Obs]]:
        """(index, record) of the records of these kinds, in order (the others not read)."""
        wanted = array("I" if len(self) < 1 << 32 else "q", compress(range(len(self)), self.kind_mask(kinds)))
        return zip(wanted, self.pick(wanted), strict=True)

    def walk_kept(self, unread: frozenset[str], labels: bytes | bytearray, keep: bytes) -> Iterator[tuple[int, Obs]]:
        """`walk` of the records whose label (`labels[index]`) `keep` (a 256-byte table) marks,
        with their indexes: one part of a log judged in parts (`conformance.checks.parts`). The
        records kept and those to read are found by C loops over the labels and kinds."""
        stubs = [Obs(0, 0, name) for name in self._kind_names]
        kinds, count = self._kinds, len(self._kinds)
        kept = labels.translate(keep)  # 1 where the part reads the record
        read = self.kind_mask(frozenset(self._kind_names) - unread)
        wanted = (int.from_bytes(kept, "big") & int.from_bytes(read, "big")).to_bytes(count, "big")
        records = self.pick(compress(range(count), wanted))
        for index in compress(range(count), kept):
            yield index, (next(records) if wanted[index] else stubs[kinds[index]])

    def close(self) -> None:
        self._file.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)  # another process gets the records, not the file


_new_obs = tuple.__new__
SPILL_AT = 250_000  # records a log keeps in memory before it moves to a temporary file (a gateway day: 185,000)
SPILL_CHUNK = 4_096  # once spilled, records written out at a time


class ObservationLog:
    """An append-only list of observations, stamped with the current time and step.

    Past `spill_at` records (None: never) it goes to a temporary file (`SpilledRecords`),
    so a run of millions of events holds a few thousand records in memory, not all of them.
    A log `expected` to write at least `spill_at` records goes to the file from its first
    `SPILL_CHUNK`: holding the first `spill_at` (≈ 640 bytes each) would only raise the peak."""

    def __init__(self, now: Any, spill_at: int | None = SPILL_AT, expected: int = 0) -> None:
        self._now = now  # a zero-argument callable returning virtual ms
        self.step: Step = 0
        self._recent: list[Obs] = []  # every record, or those not yet written out
        self._write_at = sys.maxsize if spill_at is None else max(1, spill_at)
        if expected >= self._write_at:  # it will spill anyway: from the first chunk, not after `spill_at` records held
            self._write_at = min(self._write_at, SPILL_CHUNK)
        self._file: SpilledRecords | None = None

    def add(self, kind: str, *, chat: str | None = None, session: str | None = None,
            turns: Iterable[str] = (), **detail: Any) -> Obs:
        record = _new_obs(Obs, (self._now(), self.step, kind, chat, session, tuple(turns), detail))  # Obs(...) without its __new__'s frame
        recent = self._recent
        recent.append(record)
        if len(recent) >= self._write_at:
            self._write_out()
        return record

    def add_detail(self, kind: str, detail: dict[str, Any]) -> Obs:
        """`add` of a record with no chat, session or turns whose detail the caller has built
        and hands over (it keeps no reference): taken as it is, not copied through keywords
        (a `resources` change, logged after most events)."""
        record = _new_obs(Obs, (self._now(), self.step, kind, None, None, (), detail))
        recent = self._recent
        recent.append(record)
        if len(recent) >= self._write_at:
            self._write_out()
        return record

    def _write_out(self) -> None:
        if self._file is None:
            self._file = SpilledRecords()
            self._write_at = min(self._write_at, SPILL_CHUNK)
        self._file.extend(self._recent)
        self._recent = []

    @property
    def records(self) -> Sequence[Obs]:
        """Every record so far: a list, or once spilled the file (read back on demand)."""
        if self._file is None:
            return self._recent
        self._write_out()
        return self._file

    def hand_over(self) -> Sequence[Obs]:
        """Every record, handed to the run's result: the log keeps none from here on. The run's
        objects (gateway, harness, this log) hold each other in cycles that only the cyclic
        collector frees; a log that kept its records would make every record wait for it, and
        the collector walk them all, after every run."""
        records = self.records
        self._recent, self._file = [], None
        return records

    @property
    def spilled(self) -> bool:
        return self._file is not None

    def __iter__(self) -> Iterator[Obs]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def of(self, *kinds: str) -> list[Obs]:
        return [r for r in self.records if r.kind in kinds]

    def dumps(self) -> str:
        return log_text(self.records)

    @staticmethod
    def loads(text: str) -> list[Obs]:
        return [Obs.from_json(line) for line in text.splitlines() if line]
