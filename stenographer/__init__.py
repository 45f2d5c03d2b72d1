"""Omega Stenographer: the institutional memory of an AI agent's work, as an MCP server."""

__version__ = "0.1.0"
