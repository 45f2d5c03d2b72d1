"""LlamaIndex: Omega Stenographer's tools through llama-index-tools-mcp.

    pip install llama-index-tools-mcp llama-index-llms-openai
    python examples/llamaindex_agent.py           # direct tool calls, no model needed
    OPENAI_API_KEY=... python examples/llamaindex_agent.py --agent

A recipe, not run in CI (LlamaIndex is not a dependency of this project). It follows
the llama-index-tools-mcp documentation: ``BasicMCPClient(command, args=..., env=...)``
runs a local process; ``McpToolSpec(client).to_tool_list_async()`` gives FunctionTools.
"""

from __future__ import annotations

import asyncio
import sys

from _server import SESSION, server_args, server_command, server_env
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec


async def main(use_agent: bool) -> None:
    client = BasicMCPClient(server_command(), args=server_args(), env=server_env())
    # Direct calls through the client (BasicMCPClient starts a server session per call);
    # the tool list below is what an agent gets.
    print(await client.call_tool("stenographer_ingest_exchange", {
        "role": "user", "session_id": SESSION,
        "content": "Decision: the search index is rebuilt weekly, on Sunday night."}))
    tools = await McpToolSpec(client=client).to_tool_list_async()
    print("Tools:", ", ".join(t.metadata.name or "?" for t in tools))

    if use_agent:
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.llms.openai import OpenAI

        agent = FunctionAgent(tools=tools, llm=OpenAI(model="gpt-4o-mini"),
                              system_prompt="Answer from the stenographer's records; cite #ids.")
        print(await agent.run(f"When is the search index rebuilt? Session {SESSION!r}."))


if __name__ == "__main__":
    asyncio.run(main("--agent" in sys.argv))
