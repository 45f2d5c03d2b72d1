"""A bare MCP SDK server with one no-op tool, served over the SDK's own stdio transport.

``bench/ingest_query.py`` drives it with the same raw JSON-RPC client as the real
server, so the cost of a tool call that does nothing (JSON-RPC framing, the SDK's
argument validation and result conversion, the pipe round trip) is measured on the
same machine in the same run, not assumed::

    python bench/noop_server.py
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("noop")


@server.tool(name="noop")
def noop(text: str = "") -> str:
    """Do nothing; answer an empty text."""
    return ""


if __name__ == "__main__":
    server.run("stdio")
