"""Debian's Chromium for the browser tests: find it, or install it with apt-get.

Test tools' own browser downloads (``playwright install``) fail on machines without
open network access, so the tests drive the distribution's Chromium through Playwright's
``executable_path``. ``python -m tests.browser_setup`` installs it (root, Debian);
``make pytest`` runs that first. It never fails the build: when Chromium cannot be had,
it says why and the browser tests skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["CHROMIUM", "CHROMIUM_FLAGS", "ensure_chromium"]

CHROMIUM = Path("/usr/bin/chromium")
# Headless on a machine without a GPU or open network: no background connections (they
# are refused here and slow the start), no QUIC, no first-run or sync work.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
APT_TIMEOUT_S = 900


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, env=env,
                          timeout=APT_TIMEOUT_S, check=False)


def ensure_chromium() -> tuple[Path | None, str]:
    """(path to chromium, "") when it is there or could be installed, else (None, why)."""
    if CHROMIUM.exists():
        return CHROMIUM, ""
    if shutil.which("apt-get") is None:
        return None, f"{CHROMIUM} is missing and there is no apt-get to install it"
    if os.geteuid() != 0:
        return None, (f"{CHROMIUM} is missing; install it as root: "
                      "apt-get install -y chromium")
    try:
        result = _apt("install", "-y", "-q", "chromium")
        if result.returncode != 0:  # a fresh machine has no package lists yet
            _apt("update", "-q")
            result = _apt("install", "-y", "-q", "chromium")
    except subprocess.TimeoutExpired:
        return None, f"apt-get install chromium took over {APT_TIMEOUT_S} s"
    if result.returncode != 0 or not CHROMIUM.exists():
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        return None, "apt-get install -y chromium failed: " + " | ".join(tail)
    return CHROMIUM, ""


def main() -> int:
    path, why = ensure_chromium()
    print(f"chromium: {path}" if path else f"chromium unavailable: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
