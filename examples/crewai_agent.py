"""CrewAI: Omega Stenographer's tools through crewai-tools' MCPServerAdapter.

    pip install crewai "crewai-tools[mcp]"
    python examples/crewai_agent.py               # direct tool calls, no model needed
    OPENAI_API_KEY=... python examples/crewai_agent.py --crew

A recipe, not run in CI (CrewAI is not a dependency of this project). It follows the
CrewAI MCP documentation (stdio transport): ``MCPServerAdapter(StdioServerParameters)``
as a context manager starts the server and stops it on exit.
"""

from __future__ import annotations

import sys

from _server import SESSION, server_args, server_command, server_env
from crewai import Agent, Crew, Task
from crewai_tools import MCPServerAdapter
from mcp import StdioServerParameters


def main(use_crew: bool) -> None:
    params = StdioServerParameters(command=server_command(), args=server_args(),
                                   env=server_env())
    with MCPServerAdapter(params) as tools:
        by_name = {tool.name: tool for tool in tools}
        print("Tools:", ", ".join(by_name))
        print(by_name["stenographer_ingest_exchange"].run(
            role="user", session_id=SESSION,
            content="Decision: staging deploys need one approval, production two."))
        print(by_name["stenographer_get_brief"].run(session_id=SESSION))

        if use_crew:
            historian = Agent(
                role="Project historian",
                goal="Answer questions about past decisions from the recorded memory",
                backstory="You only state what the stenographer's records show, with ids.",
                tools=tools,
            )
            task = Task(
                description=f"What approval rules did we decide on? Session {SESSION!r}.",
                expected_output="The rules, each citing its #exchange id.",
                agent=historian,
            )
            print(Crew(agents=[historian], tasks=[task]).kickoff())


if __name__ == "__main__":
    main("--crew" in sys.argv)
