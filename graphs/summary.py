"""What a stage trace says of a channel value or an error: its kind and size, never text.

Every trace write goes through ``value_summary`` and ``error_summary`` (the graph
runner's adapter calls them), and a value's kind alone decides its summary: numbers,
booleans and null as they are (counts, ids, scores, flags); a string or bytes by length
only (``str[120]``); a list, tuple or set by its number of items; a dict or dataclass
by its fields, each summarised in turn (nested ones by their number of fields). No
string value is ever copied into a trace, so a stored trace holds no turn content,
query or reply text, and forgetting a turn never has to purge traces.

A field name is shown when it is a lowercase snake_case name, as the keys of the records
that nodes write are (maps of data are keyed by ids); any other key is summarised like a
value (``str[9]``). An error is its type,
its class's error code, the exchange id it names and the length of its message: the
message goes to the caller, not into the trace (messages may quote the input).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from nodes.publish.wording import plural

__all__ = ["SUMMARY_CHARS", "error_summary", "value_summary"]

SUMMARY_CHARS = 80  # a summary longer than this is cut, ending in "…"
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_FIELDS = 16  # a record's fields summarised at most (more would be cut anyway)


def value_summary(value: Any) -> str:
    """A channel value as a trace records it."""
    text = _described(value, nested=False)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def error_summary(error: BaseException) -> str:
    """An error as a trace records it: ``NotFound: steno.not_found, exchange #7,
    message str[31]``."""
    parts = [type(error).__name__ + ":"]
    code = getattr(type(error), "code", None)  # a class constant, never the input
    if isinstance(code, str):
        parts.append(code + ",")
    exchange_id = getattr(error, "exchange_id", None)
    if isinstance(exchange_id, int) and not isinstance(exchange_id, bool):
        parts.append(f"exchange #{exchange_id},")
    parts.append(f"message str[{len(str(error))}]")
    return " ".join(parts)


def _described(value: Any, nested: bool) -> str:
    kind = type(value)
    if kind is str:  # the common kinds first, by exact type (this runs for every write)
        return f"str[{len(value)}]"
    if kind is int:
        return str(value)
    if kind is list:
        return f"[{len(value)} {plural(len(value), 'item')}]" if value else "[]"
    if kind is dict:
        return _record("", "{", "}", ": ", value.items(), len(value), nested)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return f"str[{len(value)}]"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"bytes[{len(value)}]"
    if isinstance(value, Mapping):
        return _record("", "{", "}", ": ", value.items(), len(value), nested)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return _record(type(value).__name__, "(", ")", "=",
                       ((f.name, getattr(value, f.name)) for f in fields), len(fields),
                       nested)
    if isinstance(value, Collection):
        return f"[{len(value)} {plural(len(value), 'item')}]" if len(value) else "[]"
    return type(value).__name__


def _record(name: str, opening: str, closing: str, between: str,
            fields: Iterable[tuple[Any, Any]], count: int, nested: bool) -> str:
    """A record's fields and their summaries; inside another record, its size only.
    The fields past what a summary keeps (SUMMARY_CHARS) are not described: the text
    is cut there anyway."""
    if nested:
        return (f"{name}{opening}{count} {plural(count, 'field')}{closing}" if count
                else f"{name}{opening}{closing}")
    shown: list[str] = []
    length = len(name) + len(opening)  # of the text so far, without the closing
    for key, value in itertools.islice(fields, _FIELDS):
        if length + len(closing) > SUMMARY_CHARS:  # cut anyway, its head is written
            break
        part = f"{_key(key)}{between}{_described(value, nested=True)}"
        length += len(part) + 2 * bool(shown)
        shown.append(part)
    return name + opening + ", ".join(shown + ["…"] * (count > _FIELDS)) + closing


def _key(key: Any) -> str:
    if type(key) is str and key in _NAMES:
        return key
    if isinstance(key, str) and _FIELD_NAME.fullmatch(key):
        if len(_NAMES) < _NAMES_MAX:  # field names repeat from call to call
            _NAMES.add(key)
        return key
    return _described(key, nested=True)


_NAMES: set[str] = set()  # keys seen to be field names (never any other key)
_NAMES_MAX = 4096
