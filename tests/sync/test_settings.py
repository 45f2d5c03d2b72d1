"""Sync settings: defaults, valid values, errors that say what is valid; docs/settings.md
documents every one and docs/sync.md the commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stenographer.settings import Settings, SettingsError
from tests.e2e.support import REPO_ROOT


def test_sync_settings_defaults_and_values(tmp_path: Path):
    default = Settings.from_env({})
    assert (default.sync_peer, default.sync_token, default.sync_batch) == (None, None, 500)
    assert (default.sync_interval, default.sync_timeout, default.sync_retries) == (30.0, 60.0, 5)
    token = tmp_path / "token"
    token.write_text("file-token-0123456789\n")
    set_ = Settings.from_env({"STENO_SYNC_PEER": " http://10.0.0.2:8765/ ",
                              "STENO_SYNC_TOKEN_FILE": str(token), "STENO_SYNC_BATCH": "50",
                              "STENO_SYNC_INTERVAL": "2.5", "STENO_SYNC_TIMEOUT": "5",
                              "STENO_SYNC_RETRIES": "0"})
    assert set_.sync_peer == "http://10.0.0.2:8765" and set_.sync_token is not None
    assert set_.sync_token.get_secret_value() == "file-token-0123456789"
    assert (set_.sync_batch, set_.sync_interval, set_.sync_timeout, set_.sync_retries) == (
        50, 2.5, 5.0, 0)
    assert "file-token" not in repr(set_)


@pytest.mark.parametrize(("env", "message"), [
    ({"STENO_SYNC_PEER": "ftp://host"}, "not a peer URL"),
    ({"STENO_SYNC_PEER": "http://host/?x=1"}, "not a peer URL"),
    ({"STENO_SYNC_BATCH": "0"}, "out of range"),
    ({"STENO_SYNC_INTERVAL": "soon"}, "not a number"),
    ({"STENO_SYNC_RETRIES": "101"}, "out of range"),
    ({"STENO_SYNC_TOKEN": "has space"}, "visible ASCII"),
    ({"STENO_SYNC_TOKEN": "abcdefgh12345678", "STENO_SYNC_TOKEN_FILE": "/x"}, "not both"),
])
def test_bad_sync_settings_say_what_is_valid(env: dict[str, str], message: str):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_the_docs_document_every_sync_setting_and_command():
    source = (REPO_ROOT / "stenographer" / "settings.py").read_text(encoding="utf-8")
    settings_doc = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    sync_doc = (REPO_ROOT / "docs" / "sync.md").read_text(encoding="utf-8")
    names = set(re.findall(r'"(STENO_SYNC_[A-Z_]+)"', source))
    assert names == {"STENO_SYNC_PEER", "STENO_SYNC_TOKEN", "STENO_SYNC_TOKEN_FILE",
                     "STENO_SYNC_BATCH", "STENO_SYNC_INTERVAL", "STENO_SYNC_TIMEOUT",
                     "STENO_SYNC_RETRIES"}
    assert all(f"`{name}`" in settings_doc for name in names)
    for command in ("stenographer export", "stenographer import", "stenographer sync push",
                    "stenographer sync pull", "stenographer sync status"):
        assert command in sync_doc
