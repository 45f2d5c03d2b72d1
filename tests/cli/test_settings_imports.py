"""Loading the settings loads no node, store or graph code: the settings are read at
every start, before anything is opened, and stay cheap and independent of the layers
they configure."""

from __future__ import annotations

import json
import subprocess
import sys

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
