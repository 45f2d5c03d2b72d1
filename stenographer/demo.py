"""`stenographer demo`: spawn the stdio server and drive it through the real MCP client."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

import anyio

from nodes.publish.wording import counted

__all__ = ["SAMPLE_SESSION", "run_demo"]

SESSION = "demo-checkout-latency"
SAMPLE_SESSION: list[tuple[str, str]] = [
    ("user", "The checkout service p95 latency doubled since Tuesday's deploy. Can you dig in?"),
    ("assistant", "Looking at the traces: most of the time goes to the inventory lookup, "
                  "which now calls Redis twice per item."),
    ("tool", "redis-cli --latency: min 0, max 41, avg 6.83 (1022 samples)"),
    ("assistant", "Redis itself is slow under load: avg 6.8 ms per call, up from 0.4 ms."),
    ("user", "Is the cache even helping? The inventory table is small."),
    ("assistant", "Key finding: the cache hit rate is 12%, so almost every lookup pays twice."),
    ("user", "Then let's drop Redis for inventory and read from Postgres directly."),
    ("assistant", "Decision: we drop the Redis cache for inventory lookups and read from "
                  "Postgres with a covering index."),
    ("assistant", "I added the index inventory_by_sku (sku, qty, price). The migration is "
                  "in migrations/0042_inventory_index.sql."),
    ("tool", "pytest tests/inventory -q: 3 failed, 41 passed"),
    ("assistant", "Blocked: the inventory tests are failing because the fixture still "
                  "seeds Redis."),
    ("user", "Update the fixture to seed Postgres only."),
    ("assistant", "Fixed the fixture; tests/inventory now passes (44 passed)."),
    ("assistant", "We went with a 5-second statement timeout on the inventory query."),
    ("user", "Ship it to staging and compare the p95."),
    ("tool", "staging p95 checkout latency: 182 ms (was 410 ms)"),
    ("assistant", "Staging p95 is back to 182 ms. Ready for production."),
]


def _show(title: str, body: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))
    print(body)


async def _drive(data_dir: str) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = {"OMEGA_STENOGRAPHER_DIR": data_dir}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=sys.executable, args=["-m", "stenographer"],
                                   env=env)
    started = time.perf_counter()
    async with Client(params) as client:
        _show("Server", f"omega-stenographer over stdio, ready in "
                        f"{time.perf_counter() - started:.2f} s; data in {data_dir}")
        tools = await client.list_tools()
        print("Tools:", ", ".join(t.name for t in tools.tools))

        lines = []
        ids: list[int] = []
        for n, (role, content) in enumerate(SAMPLE_SESSION):
            result = await client.call_tool("stenographer_ingest_exchange", {
                "role": role, "content": content, "session_id": SESSION,
                "created_at": f"2026-11-24T09:{n * 3:02d}:00Z"})
            _check(result)
            ids.append(result.structured_content["exchange_id"])
            lines.append(_text(result))
        _show(f"Ingested {counted(len(SAMPLE_SESSION), 'turn')} of a working session",
              "\n".join(lines))

        result = await client.call_tool("stenographer_mark_milestone", {
            "session_id": SESSION, "exchange_id": ids[-1], "label": "latency fix on staging"})
        _check(result)
        _show("Milestone", _text(result))

        result = await client.call_tool("stenographer_get_brief", {"session_id": SESSION})
        _check(result)
        _show("Running notes (stenographer_get_brief)", _text(result))

        result = await client.call_tool("stenographer_query_history", {
            "query": "why did we stop using redis?", "session_id": SESSION, "limit": 3})
        _check(result)
        _show("Search with provenance (stenographer_query_history)", _text(result))

        result = await client.call_tool("stenographer_compact_guard", {
            "session_id": SESSION, "query": "inventory tests failing", "top_k": 2})
        _check(result)
        _show("Compaction briefing (stenographer_compact_guard)", _text(result))

        trace: dict[str, Any] = result.structured_content["trace"]
        stored = await client.read_resource(f"omega-stenographer://runs/{trace['run_id']}")
        from stenographer.render import waterfall

        text = getattr(stored.contents[0], "text", "{}")
        _show("Stage trace of that run (resource omega-stenographer://runs/{run_id})",
              waterfall(json.loads(text)))


def _text(result: Any) -> str:
    return str(getattr(result.content[0], "text", ""))


def _check(result: Any) -> None:
    if result.is_error:
        raise SystemExit(f"demo failed: {_text(result)}")


def run_demo(data_dir: str | None = None) -> int:
    if data_dir is None:
        with tempfile.TemporaryDirectory(prefix="steno-demo-") as tmp:
            anyio.run(_drive, tmp)
    else:
        anyio.run(_drive, data_dir)
    print("\nDemo finished: every tool answered through a real MCP client over stdio.")
    return 0
