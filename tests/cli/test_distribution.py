"""Distribution files agree with the project: registry metadata, README marker,
Dockerfile, and package data (every non-Python file in a package ships in the wheel)."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from typing import Any

from tests.cli.conftest import REPO_ROOT

PYPROJECT: dict[str, Any] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
MCP_NAME = "io.github.omega-stenographer/omega-stenographer"


def test_server_json_matches_the_project() -> None:
    server = json.loads((REPO_ROOT / "server.json").read_text())
    assert server["$schema"].startswith("https://static.modelcontextprotocol.io/schemas/")
    assert server["name"] == MCP_NAME
    assert len(server["description"]) <= 100
    assert server["version"] == PROJECT["version"]
    (package,) = server["packages"]
    assert package["registryType"] == "pypi"
    assert package["identifier"] == PROJECT["name"]
    assert package["version"] == PROJECT["version"]
    assert package["runtimeHint"] == "uvx"
    assert package["transport"] == {"type": "stdio"}
    # `uvx omega-stenographer-mcp` runs the console script named like the package.
    assert PROJECT["name"] in PROJECT["scripts"]


def test_readme_carries_the_registry_marker() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert f"mcp-name: {MCP_NAME}" in readme


def test_glama_json() -> None:
    glama = json.loads((REPO_ROOT / "glama.json").read_text())
    assert glama["$schema"] == "https://glama.ai/mcp/schemas/server.json"
    assert glama["maintainers"]


def test_dockerfile_is_non_root_unbuffered_stdio_by_default() -> None:
    text = (REPO_ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip()
             and not line.lstrip().startswith("#")]
    assert lines[0] == "FROM python:3.12-slim"
    user = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert user and user[-1] not in ("root", "0")
    assert "PYTHONUNBUFFERED=1" in text and "OMEGA_STENOGRAPHER_DIR=/data" in text
    assert 'VOLUME ["/data"]' in lines
    assert lines[-1] == 'ENTRYPOINT ["stenographer", "serve"]'
    copied = {m.group(1) for m in re.finditer(r"^COPY (\w+) \./\1$", text, re.M)}
    packages = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]
                ["include"]}
    assert packages <= copied, "the image must copy every package"


def test_every_package_data_file_ships() -> None:
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["*"]
    roots = [p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]
             ["include"]]
    missing = [
        str(path.relative_to(REPO_ROOT))
        for root in roots
        for path in (REPO_ROOT / root).rglob("*")
        # .c: the compiled extension's source (setup.py), .so: the library built from it
        if path.is_file() and path.suffix not in (".py", ".pyc", ".c", ".so")
        and "__pycache__" not in
        path.parts and not any(fnmatch.fnmatch(path.name, pat) for pat in patterns)
    ]
    assert not missing, f"add their patterns to [tool.setuptools.package-data]: {missing}"


def test_console_scripts() -> None:
    assert PROJECT["scripts"] == {"stenographer": "stenographer.cli:main",
                                  "omega-stenographer-mcp": "stenographer.serve_cli:main"}
