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

import inspect
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, Icon, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from nodes.evaluate_contracts.requests import first_sentence, valid_form
from nodes.publish.wording import counted

__all__ = ["StenoServer", "argument_errors", "explain_early_request"]


class StenoServer(MCPServer[Any]):
    """``MCPServer`` whose argument and handshake errors say what is valid, and whose
    tools' structured content is checked once per call, not twice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.middleware.append(explain_early_request)

    def add_tool(self, fn: Callable[..., Any], name: str | None = None,
                 title: str | None = None, description: str | None = None,
                 annotations: ToolAnnotations | None = None, icons: list[Icon] | None = None,
                 meta: dict[str, Any] | None = None, structured_output: bool | None = None
                 ) -> None:
        """Register a tool. One that returns ``Annotated[CallToolResult, Model]`` builds
        its structured content from an instance of ``Model``
        (``stenographer.server._result``), and building it is the check of the content
        against the model; the SDK would validate the dumped content against the same
        model again on every call (20-40 µs). Without the model it publishes the same
        outputSchema and passes the result on as it is (``FuncMetadata.convert_result``).
        A tool returning anything else keeps the SDK's conversion and check."""
        super().add_tool(fn, name=name, title=title, description=description,
                         annotations=annotations, icons=icons, meta=meta,
                         structured_output=structured_output)
        tool = self._tool_manager.get_tool(name or fn.__name__)
        returns = inspect.signature(fn).return_annotation  # a string: not known, kept
        if (tool is not None and get_origin(returns) is Annotated
                and get_args(returns)[0] is CallToolResult):
            tool.fn_metadata.output_model = None

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as ex:
            cause = ex.__cause__
            if isinstance(ex, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            # the schema the client was given (tools/list), without listing every tool
            tool = self._tool_manager.get_tool(name)
            schema = tool.parameters if tool is not None else {}
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
            line += f"; valid: {valid_form(prop)}"
            description = " ".join(str(prop.get("description", "")).split())
            if description:
                line += f". {first_sentence(description)}"
        lines.append(line)
    return "\n".join(lines)


def _problem(item: Any) -> str:
    if item["type"] == "string_unicode" and isinstance(item.get("input"), str):
        from nodes.evaluate_contracts.inputs import lone_surrogate

        problem = lone_surrogate(item["input"])
        if problem is not None:
            return problem
    return str(item["msg"])


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
