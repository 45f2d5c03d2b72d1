"""A command's options from its operation's request model (``nodes/evaluate_contracts/
requests.py``): names, types, choices, defaults and help come from the model's fields,
so the command line accepts what the MCP tool and the graph accept.

A field is ``--field-name`` unless the command spells it otherwise (``--session`` for
``session_id``) or takes it as a positional argument; a required field is a required
option (``migrate --to``). Booleans are switches (a field
that defaults to true is switched off, e.g. ``--no-vacuum``); a ``Literal`` is a
``choices`` list; an integer is parsed as one (its bounds are the graph's to check, so
an out-of-range value is reported like any bad input); a list of integers is a
repeatable option. The parsed value lands in ``args.<field>``; ``request_of``
collects them back into the graph's request.
"""

from __future__ import annotations

import argparse
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["add_options", "request_of"]


def add_options(parser: argparse.ArgumentParser, model: type[BaseModel], *,
                names: dict[str, str] | None = None, positional: tuple[str, ...] = (),
                helps: dict[str, str] | None = None, metavars: dict[str, str] | None = None,
                either: tuple[str, ...] = (), leave_out: tuple[str, ...] = ()) -> None:
    """Add an option (or a positional argument) per field of ``model``.

    ``names``: option spellings by field; ``positional``: fields taken in order without
    a dash; ``helps``: help texts where the field's description speaks of the tool's
    argument names; ``either``: fields of which exactly one must be given (a required
    mutually exclusive group); ``leave_out``: fields the command does not offer.
    """
    names, helps, metavars = names or {}, helps or {}, metavars or {}
    group = parser.add_mutually_exclusive_group(required=True) if either else None
    for name, info in model.model_fields.items():
        if name in leave_out:
            continue
        target: Any = group if name in either else parser
        kwargs = _argument(info)
        kwargs["help"] = helps.get(name) or _help(info)
        if name in metavars:
            kwargs["metavar"] = metavars[name]
        if name in positional:
            if info.is_required():
                kwargs.pop("default", None)
            else:
                kwargs["nargs"] = "?"
            target.add_argument(name, **kwargs)
            continue
        if info.is_required() and name not in either:
            kwargs["required"] = True
        flag = names.get(name) or "--" + name.replace("_", "-")
        if kwargs.get("action") == "store_false" and not flag.startswith("--no-"):
            flag = "--no-" + flag.removeprefix("--")
        if "type" in kwargs and "metavar" not in kwargs:  # --session SESSION, not SESSION_ID
            kwargs["metavar"] = flag.removeprefix("--").replace("-", "_").upper()
        target.add_argument(flag, dest=name, **kwargs)


def request_of(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The graph's request: the model's fields that the command parsed."""
    return {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}


def _argument(info: FieldInfo) -> dict[str, Any]:
    kind = _non_null(info.annotation)
    default = None if info.is_required() else info.default
    if kind is bool:
        return {"action": "store_false" if default else "store_true"}
    if get_origin(kind) is Literal:
        return {"choices": get_args(kind), "default": default}
    if get_origin(kind) is list:
        (item,) = get_args(kind)
        return {"action": "append", "type": _convert(item), "default": default}
    return {"type": _convert(kind), "default": default}


def _convert(kind: Any) -> Any:
    """int or str. Bounds are left to the graph's validate stage (the same model), so an
    out-of-range value is reported like any other bad input: with --json, as JSON."""
    if get_origin(kind) is Annotated:  # Annotated[int, Field(ge=...)]
        kind = get_args(kind)[0]
    return int if kind is int else str


def _non_null(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        return options[0] if len(options) == 1 else annotation
    return annotation


def _help(info: FieldInfo) -> str | None:
    """The description's first sentence, lower-cased as argparse help reads."""
    text = " ".join((info.description or "").split())
    if not text:
        return None
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")
    return first[:1].lower() + first[1:]
