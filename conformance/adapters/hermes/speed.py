"""Seams for speed only, same results with less work: config deep copies by marshal, libyaml's
YAML loader, the schema's column table and this process's start time, each computed once."""

from __future__ import annotations

import copy
import functools
import marshal
import os
from typing import Any

import yaml


def _copy_config(value: Any, memo: Any = None, _nil: Any = None) -> Any:
    """`copy.deepcopy` for the plain YAML data Hermes copies on every config read
    (hermes_cli/config.py:_load_config_impl, a third of a turn's CPU): a marshal round trip
    gives an equal, independent copy (shared parts stay shared); anything marshal cannot
    carry still goes through `copy.deepcopy`."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return copy.deepcopy(value, memo)


_real_safe_load = yaml.safe_load


def fast_yaml(on: bool) -> None:
    """While a Hermes process runs, `yaml.safe_load` is libyaml's loader, as Hermes's own
    `utils.fast_safe_load` is (gateway/run.py re-reads config.yaml several times a turn)."""
    yaml.safe_load = _fast_safe_load if on else _real_safe_load


def _fast_safe_load(stream: Any) -> Any:
    return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def _schema_columns(parse: Any, schema_sql: str) -> dict[str, dict[str, str]]:
    return parse(schema_sql)


def cache_schema_columns(session_db: Any) -> None:
    """`SessionDB._parse_schema_columns(SCHEMA_SQL)` builds a scratch in-memory database from
    the schema text at every open (a boot, a restart, a foreign surface's connection): a pure
    function of that text, computed once per process here (each caller gets its own copy)."""
    parse = getattr(session_db, "_parse_schema_columns", None)
    if parse is None:
        return

    def parse_schema_columns(schema_sql: str) -> dict[str, dict[str, str]]:
        return {table: dict(columns) for table, columns in _schema_columns(parse, schema_sql).items()}

    session_db._parse_schema_columns = staticmethod(parse_schema_columns)


def cache_own_start_time(status: Any) -> None:
    """`gateway.status._get_process_start_time` reads /proc/<pid>/stat each time the runtime
    status file is written (a few times a turn). Every simulated Hermes process is this one
    real process, whose start time never changes: read once. Other pids are still read."""
    real = getattr(status, "_get_process_start_time", None)
    if real is None:
        return
    own: dict[int, Any] = {}

    def get_process_start_time(pid: int) -> Any:
        if pid != os.getpid():
            return real(pid)
        if pid not in own:
            own[pid] = real(pid)
        return own[pid]

    status._get_process_start_time = get_process_start_time
