"""The settings model: loading it loads no node, store or graph code (the settings are
read at every start, before anything is opened), and every variable it reads is
documented in docs/settings.md."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from stenographer.settings import Settings
from tests.cli.conftest import REPO_ROOT, TIMEOUT


def test_loading_the_settings_imports_no_node_store_or_graph_module():
    code = ("import json, sys; from stenographer.settings import Settings; "
            "Settings.from_env({}); print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=TIMEOUT, check=True)
    loaded = json.loads(out.stdout)
    layers = [m for m in loaded if m.split(".")[0] in ("nodes", "store", "graphs")]
    assert layers == []
    assert "stenographer.settings" in loaded and "constants" in loaded


def test_every_variable_is_documented():
    source = (REPO_ROOT / "stenographer" / "settings.py").read_text(encoding="utf-8")
    doc = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    aliases = {str(f.validation_alias) for f in Settings.model_fields.values()
               if f.validation_alias is not None}
    named = set(re.findall(r'"((?:STENO|OMEGA|VERITAS)_[A-Z_]+)"', source))
    assert len(aliases) > 30 and aliases <= named
    undocumented = sorted(n for n in named if f"`{n}`" not in doc)
    assert undocumented == []
