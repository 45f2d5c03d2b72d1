"""Omega Stenographer: the institutional memory of an AI agent's work, as an MCP server."""

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "omega-stenographer-mcp"

try:  # the installed distribution's version (pyproject.toml), as MCP hosts are told it
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
