"""An observation log kept in a temporary file: how a long run's memory stays bounded.

Past a threshold (`observations.SPILL_AT` records) the log writes its records out as the
canonical JSON lines `log_text()` gives, and keeps only each line's offset. `SpilledRecords`
reads them back as a sequence: iteration streams the file (as often as a reader likes; the
checks make several passes) and indexing reads one line. The bytes are the same whether a
log spilled or not; only where they live differs.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, overload

from conformance.observations import Obs

BLOCK = 1 << 20  # bytes per read while streaming


class SpilledRecords(Sequence[Obs]):
    """Records in an unnamed temporary file (gone when this object is), one JSON line each."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 -- lives as long as this object
        self._fd = self._file.fileno()
        self._starts = array("q")  # byte offset of each line
        self._kinds = bytearray()  # each record's kind, as its position in `_kind_names`
        self._kind_codes: dict[str, int] = {}
        self._kind_names: list[str] = []
        self._end = 0  # bytes written
        self._head: Obs | None = None  # record 0, which readers ask for often (the scenario)

    def extend(self, records: Iterable[Obs]) -> None:
        """Append records to the file (in order)."""
        records = list(records)
        if not records:
            return
        lines = [(r.to_json() + "\n").encode() for r in records]
        codes = self._kind_codes
        for r in records:
            if r.kind not in codes:
                codes[r.kind] = len(self._kind_names)
                self._kind_names.append(r.kind)
        self._kinds.extend(map(codes.__getitem__, (r.kind for r in records)))
        self._starts.extend(accumulate(map(len, lines[:-1]), initial=self._end))
        data = b"".join(lines)
        self._file.write(data)
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
        start = self._starts[index]  # IndexError past the end, as a list
        stop = self._starts[index + 1] if index + 1 < len(self._starts) else self._end
        record = Obs.from_json(os.pread(self._fd, stop - start, start))
        if index == 0:
            self._head = record
        return record

    def __iter__(self) -> Iterator[Obs]:
        for line in self.lines():
            yield Obs.from_json(line)

    def __reversed__(self) -> Iterator[Obs]:
        for index in range(len(self) - 1, -1, -1):
            yield self[index]

    def kinds(self) -> Iterator[str]:
        """Each record's kind, in order, without reading the file."""
        return map(self._kind_names.__getitem__, self._kinds)

    def pick(self, indexes: Sequence[int]) -> Iterator[Obs]:
        """The records at these ascending indexes, read forward in blocks: one read for many
        records instead of one each."""
        starts, end, count = self._starts, self._end, len(self._starts)
        base, block = 0, b""
        for index in indexes:
            start = starts[index]
            stop = starts[index + 1] if index + 1 < count else end
            if start < base or stop > base + len(block):
                base, block = start, os.pread(self._fd, max(BLOCK, stop - start), start)
            yield Obs.from_json(block[start - base:stop - base])

    def lines(self) -> Iterator[bytes]:
        """Each record's JSON line (without its newline), streamed from the file."""
        end, offset, carry = self._end, 0, b""
        while offset < end:
            block = os.pread(self._fd, min(BLOCK, end - offset), offset)
            offset += len(block)
            *whole, carry = (carry + block).split(b"\n")
            yield from whole

    def text(self) -> str:
        """The whole log as `log_text()` gives it."""
        return os.pread(self._fd, self._end, 0).decode()

    def close(self) -> None:
        self._file.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)  # another process gets the records, not the file
