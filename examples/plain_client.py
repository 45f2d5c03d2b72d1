"""Use Omega Stenographer from plain Python through the official MCP SDK client.

It starts the stdio server as a child process (exactly what an MCP host does), records
a few turns of a conversation, searches them and prints the running notes.

    python examples/plain_client.py                # a fresh temporary store
    python examples/plain_client.py --dir ./data   # or a store of your choice

Needs only the server's own dependencies (``pip install omega-stenographer-mcp``).
Run from a source checkout, it finds the package through ``PYTHONPATH=.``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

SESSION = "example-billing-bug"
TURNS = [
    ("user", "Invoices for annual plans show the monthly price. Can you find out why?"),
    ("assistant", "The invoice template reads plan.price, which is always the monthly price."),
    ("assistant", "Decision: we compute the invoice amount from plan.billing_period instead "
                  "of changing the template."),
    ("tool", "pytest tests/billing -q: 1 failed, 57 passed"),
    ("assistant", "Blocked: the failing test expects the old monthly amount for annual plans."),
    ("user", "Update that test; the annual amount is correct."),
]
CALL_TIMEOUT = 60.0  # seconds; bounds the handshake and every call


def server(data_dir: str) -> StdioServerParameters:
    """The stdio server of this Python environment, storing its data in ``data_dir``.

    Hosts give servers a minimal environment, so everything it needs is passed here.
    """
    env = {"OMEGA_STENOGRAPHER_DIR": data_dir}
    if os.environ.get("PYTHONPATH"):  # running from a source checkout
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return StdioServerParameters(command=sys.executable, args=["-m", "stenographer"], env=env)


def text(result: Any) -> str:
    """The first text content of a tool result; a tool error stops the example."""
    body = str(getattr(result.content[0], "text", ""))
    if result.is_error:
        raise SystemExit(f"tool error: {body}")
    return body


async def main(data_dir: str) -> None:
    async with Client(server(data_dir), read_timeout_seconds=CALL_TIMEOUT) as client:
        tools = await client.list_tools()
        print("Tools:", ", ".join(t.name for t in tools.tools))

        print("\n# Record the conversation, one call per turn")
        for role, content in TURNS:
            result = await client.call_tool("stenographer_ingest_exchange", {
                "role": role, "content": content, "session_id": SESSION})
            print(text(result))

        print("\n# Search it (every hit cites its exchange id)")
        result = await client.call_tool("stenographer_query_history", {
            "query": "why was the annual invoice wrong?", "session_id": SESSION, "limit": 3})
        print(text(result))
        hits = (result.structured_content or {}).get("hits", [])
        print(f"(structured: {len(hits)} hits, first #{hits[0]['exchange_id'] if hits else '-'})")

        print("\n# Running notes of the session")
        result = await client.call_tool("stenographer_get_brief", {"session_id": SESSION})
        print(text(result))


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="data directory (default: a fresh temporary one)")
    args = parser.parse_args()
    if args.dir:
        anyio.run(main, os.path.abspath(args.dir))
        return
    with tempfile.TemporaryDirectory(prefix="steno-example-") as tmp:
        anyio.run(main, tmp)


if __name__ == "__main__":
    run()
