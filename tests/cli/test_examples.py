"""examples/plain_client.py runs against the real stdio server; the framework recipes
(not run: their frameworks are not dependencies) at least parse and use their adapters."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import REPO_ROOT, TIMEOUT, cli_env

EXAMPLES = REPO_ROOT / "examples"
RECIPES = {  # file -> the adapter it must import
    "langchain_agent.py": "langchain_mcp_adapters.client",
    "crewai_agent.py": "crewai_tools",
    "autogen_agent.py": "autogen_ext.tools.mcp",
    "llamaindex_agent.py": "llama_index.tools.mcp",
}


def test_plain_client_example(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "plain_client.py"), "--dir", str(data_dir)],
        cwd=tmp_path, env=cli_env(data_dir), capture_output=True, text=True,
        encoding="utf-8", timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "stenographer_ingest_exchange" in out
    assert "Ingested [user] #1" in out and "Ingested [user] #6" in out
    assert "Found 3 of" in out and "first #" in out
    assert "# Running notes" in out and "plan.billing_period" in out
    assert (data_dir / "steno.db").is_file()


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_framework_recipe_uses_its_adapter(name: str) -> None:
    tree = ast.parse((EXAMPLES / name).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert RECIPES[name] in imported
    assert "_server" in imported  # one way to start the server, shared
    assert ast.get_docstring(tree) and "not run in CI" in (ast.get_docstring(tree) or "")
