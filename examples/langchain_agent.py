"""LangChain: Omega Stenographer's tools through langchain-mcp-adapters.

    pip install langchain-mcp-adapters langchain "langchain[anthropic]"
    python examples/langchain_agent.py            # direct tool calls, no model needed
    ANTHROPIC_API_KEY=... python examples/langchain_agent.py --agent

A recipe, not run in CI (LangChain is not a dependency of this project). The adapter
API follows the langchain-mcp-adapters documentation: MultiServerMCPClient with a
"stdio" connection; ``client.session(name)`` keeps one server process for all calls
(``get_tools()`` alone would start a new one per call).
"""

from __future__ import annotations

import asyncio
import sys

from _server import SESSION, server_args, server_command, server_env
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools


async def main(use_agent: bool) -> None:
    client = MultiServerMCPClient({
        "stenographer": {
            "transport": "stdio",
            "command": server_command(),
            "args": server_args(),
            "env": server_env(),
        },
    })
    async with client.session("stenographer") as session:
        tools = {tool.name: tool for tool in await load_mcp_tools(session)}
        print("Tools:", ", ".join(tools))
        print(await tools["stenographer_ingest_exchange"].ainvoke({
            "role": "user", "session_id": SESSION,
            "content": "Decision: we keep the nightly export job on cron, not Airflow."}))
        print(await tools["stenographer_query_history"].ainvoke({
            "query": "what did we decide about the nightly export?", "session_id": SESSION}))

        if use_agent:
            from langchain.agents import create_agent

            agent = create_agent("anthropic:claude-sonnet-4-5", list(tools.values()))
            reply = await agent.ainvoke({"messages": [{"role": "user", "content": (
                f"Using the stenographer tools (session {SESSION!r}), tell me what we "
                "decided about the nightly export and cite the exchange id.")}]})
            print(reply["messages"][-1].content)


if __name__ == "__main__":
    asyncio.run(main("--agent" in sys.argv))
