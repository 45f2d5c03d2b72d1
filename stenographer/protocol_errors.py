"""Errors a caller can fix, in words: invalid tool arguments and a call before the
handshake.

The SDK answers arguments that fail a tool's signature with pydantic's report (type
codes, the input echoed back, a link to pydantic's site), and a request before
``initialize`` with a bare "Invalid request parameters". ``StenoServer`` rewrites both in
one place each: every argument error of every tool becomes one line per argument saying
what was wrong and what is valid, taken from the tool's input schema (the schema the
client was given); the early request is told what to send first.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult
from pydantic import ValidationError

from nodes.publish.wording import counted

__all__ = ["StenoServer", "argument_errors", "explain_early_request"]


class StenoServer(MCPServer[Any]):
    """``MCPServer`` whose argument and handshake errors say what is valid."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.middleware.append(explain_early_request)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as ex:
            cause = ex.__cause__
            if isinstance(ex, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            schema = next((t.input_schema for t in await self.list_tools() if t.name == name),
                          {})
            # Chained to the pydantic error: the SDK logs its field names.
            raise ToolError(argument_errors(name, cause, schema)) from cause


# --- tool arguments ----------------------------------------------------------------------------

def argument_errors(tool: str, error: ValidationError, schema: dict[str, Any]) -> str:
    """``Error executing tool <tool>: N invalid arguments`` ("1 invalid argument"), then
    one line per argument, in name order: ``<name>: <what is wrong>; valid: <form>.
    <description>``."""
    problems: dict[str, list[str]] = {}
    for item in error.errors(include_url=False):
        loc = item["loc"]
        name = str(loc[0]) if loc else "arguments"
        where = "".join(f"item {part}: " if isinstance(part, int) else f"{part}: "
                        for part in loc[1:])
        problems.setdefault(name, []).append(where + _problem(item))
    properties = schema.get("properties", {})
    lines = [f"Error executing tool {tool}: {counted(len(problems), 'invalid argument')}"]
    for name in sorted(problems):
        line = f"{name}: {'; '.join(dict.fromkeys(problems[name]))}"
        prop = properties.get(name)
        if prop is None:
            line += f"; valid arguments: {', '.join(sorted(properties)) or 'none'}"
        else:
            line += f"; valid: {_form(prop)}"
            description = " ".join(str(prop.get("description", "")).split())
            if description:
                line += f". {_first_sentence(description)}"
        lines.append(line)
    return "\n".join(lines)


def _problem(item: Any) -> str:
    if item["type"] == "string_unicode" and isinstance(item.get("input"), str):
        from nodes.evaluate_contracts.inputs import lone_surrogate

        problem = lone_surrogate(item["input"])
        if problem is not None:
            return problem
    return str(item["msg"])


_PLURALS = {"integer": "integers", "string": "strings", "number": "numbers",
            "boolean": "booleans"}


def _form(prop: dict[str, Any]) -> str:
    """The values a JSON schema accepts, in words."""
    if "anyOf" in prop:
        forms = [_form(p) for p in prop["anyOf"] if p.get("type") != "null"]
        nullable = len(forms) < len(prop["anyOf"])
        return " or ".join(forms) + (" or null" if nullable else "")
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    kind = prop.get("type")
    if kind == "string":
        return "a string" + _bounds(prop, "minLength", "maxLength", " characters", " of ")
    if kind in ("integer", "number"):
        return f"{'an integer' if kind == 'integer' else 'a number'}" + _bounds(
            prop, "minimum", "maximum", "", " ")
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = prop.get("items", {})
        noun = _PLURALS.get(items.get("type", ""), "items")
        return f"a list of {noun}" + _bounds(prop, "minItems", "maxItems", " items", " (", ")")
    if kind == "object":
        return "an object"
    return "any JSON value"


def _bounds(prop: dict[str, Any], low_key: str, high_key: str, unit: str, lead: str,
            tail: str = "") -> str:
    low, high = prop.get(low_key), prop.get(high_key)
    last = high if high is not None else low
    if last == 1:
        unit = unit.removesuffix("s")  # "at least 1 character"
    if low is not None and high is not None:
        words = f"from {low} to {high}{unit}" if not unit else f"{low}-{high}{unit}"
    elif low is not None:
        words = f"at least {low}{unit}"
    elif high is not None:
        words = f"at most {high}{unit}"
    else:
        return ""
    return f"{lead}{words}{tail}"


def _first_sentence(text: str) -> str:
    """Up to the first full stop followed by a capital letter ("e.g. the" runs on)."""
    return re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")


# --- before the handshake ---------------------------------------------------------------------

async def explain_early_request(ctx: ServerRequestContext[Any, Any], call_next: CallNext
                                ) -> HandlerResult:
    """Middleware: the SDK refuses a request before ``initialize`` with a bare "Invalid
    request parameters" (-32602, no data); say that the session is not initialized and
    what to send. The code stays, for clients that look for it."""
    try:
        return await call_next(ctx)
    except MCPError as ex:
        if (ex.error.code != INVALID_PARAMS or ex.error.data or ctx.method == "initialize"
                or ctx.session.client_params is not None):
            raise
        raise MCPError(code=INVALID_PARAMS, message=(
            f"Invalid request parameters: the session is not initialized, so {ctx.method} "
            "cannot be served yet. Send an initialize request first, then the "
            "notifications/initialized notification, then this request again"),
            data={"method": ctx.method, "expected": "initialize"}) from None
