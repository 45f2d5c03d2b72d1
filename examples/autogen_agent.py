"""AutoGen: Omega Stenographer's tools through autogen-ext's McpWorkbench.

    pip install "autogen-agentchat" "autogen-ext[mcp,openai]"
    python examples/autogen_agent.py              # direct tool calls, no model needed
    OPENAI_API_KEY=... python examples/autogen_agent.py --agent

A recipe, not run in CI (AutoGen is not a dependency of this project). It follows the
autogen-ext documentation: ``McpWorkbench(StdioServerParams(...))`` keeps one server
session; ``mcp_server_tools(params)`` is the alternative that returns tool adapters.
"""

from __future__ import annotations

import asyncio
import sys

from _server import SESSION, server_args, server_command, server_env
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams


async def main(use_agent: bool) -> None:
    params = StdioServerParams(command=server_command(), args=server_args(), env=server_env(),
                               read_timeout_seconds=60)
    async with McpWorkbench(server_params=params) as workbench:
        tools = await workbench.list_tools()
        print("Tools:", ", ".join(t["name"] for t in tools))
        result = await workbench.call_tool("stenographer_ingest_exchange", {
            "role": "assistant", "session_id": SESSION,
            "content": "Decision: retries use exponential backoff capped at 30 seconds."})
        print(result.to_text())
        result = await workbench.call_tool("stenographer_query_history", {
            "query": "retry backoff", "session_id": SESSION})
        print(result.to_text())

        if use_agent:
            from autogen_agentchat.agents import AssistantAgent
            from autogen_ext.models.openai import OpenAIChatCompletionClient

            agent = AssistantAgent(
                "historian", model_client=OpenAIChatCompletionClient(model="gpt-4o"),
                workbench=workbench,
                system_message="Answer from the stenographer's records and cite #ids.")
            reply = await agent.run(task=f"What is our retry policy? Session {SESSION!r}.")
            print(reply.messages[-1].content)


if __name__ == "__main__":
    asyncio.run(main("--agent" in sys.argv))
