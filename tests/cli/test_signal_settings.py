"""Settings, command line and documentation for the ingest-side signals (redaction, trace ids,
NAFE flags)."""

from __future__ import annotations

import pytest

from nodes.evaluate_contracts.requests import FLAG_FILTERS
from nodes.extract.nafe import SIGNATURES
from stenographer.cli import build_parser
from stenographer.settings import Settings, SettingsError
from tests.conftest import REPO_ROOT


def test_redaction_is_on_by_default_and_can_be_switched() -> None:
    assert Settings.from_env({}).redact_secrets is True
    for off in ("off", "0", "false", "NO"):
        assert Settings.from_env({"STENO_REDACT_SECRETS": off}).redact_secrets is False
    for on in ("on", "1", "true", "yes"):
        assert Settings.from_env({"STENO_REDACT_SECRETS": on}).redact_secrets is True
    with pytest.raises(SettingsError, match=r"STENO_REDACT_SECRETS='maybe' is not valid"):
        Settings.from_env({"STENO_REDACT_SECRETS": "maybe"})


def test_extra_secret_patterns_are_checked_at_start() -> None:
    env = {"STENO_SECRET_PATTERNS": "acme_[0-9a-f]{16}\n\n  corp-(\\d{8})  \n"}
    assert Settings.from_env(env).secret_patterns == ("acme_[0-9a-f]{16}", "corp-(\\d{8})")
    with pytest.raises(SettingsError, match=r"STENO_SECRET_PATTERNS: invalid secret pattern"):
        Settings.from_env({"STENO_SECRET_PATTERNS": "(unclosed"})


def test_search_command_takes_the_new_filters() -> None:
    assert ("NAFE", *SIGNATURES) == FLAG_FILTERS  # spelled out in the request vocabulary
    flag = next(a for a in build_parser()._subparsers._group_actions[0].choices["search"]
                ._actions if a.dest == "flag")
    assert tuple(flag.choices) == FLAG_FILTERS
    args = build_parser().parse_args(["search", "x", "--all", "--trace-id",
                                      "VT-20261130-1a2b3c4d", "--flag", "AUTHORITY_DRIFT"])
    assert (args.trace_id, args.flag) == ("VT-20261130-1a2b3c4d", "AUTHORITY_DRIFT")


def test_the_docs_document_the_settings_and_reply_format() -> None:
    readme = "".join((REPO_ROOT / "docs" / name).read_text(encoding="utf-8")
                     for name in ("settings.md", "tools.md"))
    for name in ("STENO_REDACT_SECRETS", "STENO_SECRET_PATTERNS", "trace_id", "`flag`",
                 "; ⚠ NAFE:<SIG>[,<SIG>]", "; trace:<id>)", "; redacted: R"):
        assert name in readme, name
