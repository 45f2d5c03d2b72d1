"""Omega Stenographer: the institutional memory of an AI agent's work, as an MCP server."""

import os
from importlib.metadata import PackageNotFoundError, version

# numpy's OpenBLAS runs on this process's thread only. Its products here are small
# (query vectors against a session's or a store's 128-dimension vectors): a pool of
# threads cost more to start (about 30 ms of CPU when numpy is imported, on two cores)
# and to keep spinning between calls than it saved, and a process's speed must not
# depend on its caller's environment. Set before anything imports numpy: every
# process of the project (server, commands, hook) starts in this package.
os.environ["OPENBLAS_NUM_THREADS"] = "1"

DISTRIBUTION = "omega-stenographer-mcp"

try:  # the installed distribution's version (pyproject.toml), as MCP hosts are told it
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
