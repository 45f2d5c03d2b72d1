"""Secret redaction of stored free text, driven by the labelled cases file.

The file holds the project's own cases (``source`` absent: ``project``) and cases taken
from secret scanners' published rule sets and test fixtures (gitleaks, detect-secrets,
trufflehog). Quality is measured over the whole file and per source
(bench/flag_quality.py prints the same figures); per case, the replacement must leave
nothing of the secret, and for the project's cases the kinds found are the labelled
ones. A miss or a false positive the file keeps says so in its note ("honest miss",
"honest false positive").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.extraction_quality import load_cases
from bench.flag_quality import (
    SECRET_SOURCES,
    SecretCase,
    load_secret_cases,
    score_secrets_by_source,
)
from nodes.extract.secrets import KINDS, MARK, compile_extra, find_secrets, redact

CASES = load_secret_cases()
# (precision, recall) floors per source; "all" is the whole file.
FLOORS = {"project": (0.99, 0.97), "gitleaks": (0.99, 0.93), "detect-secrets": (0.99, 0.5),
          "trufflehog": (0.99, 0.95), "all": (0.99, 0.88)}
# The issue names these shapes; the cases file must hold positives of each.
REQUIRED_KINDS = {"aws_access_key", "github_token", "private_key", "url_password",
                  "auth_header", "secret_assignment", "jwt", "slack_token", "stripe_key",
                  "openai_key"}


def test_cases_file_is_large_and_balanced() -> None:
    assert len(CASES) >= 1000
    texts = [c.text for c in CASES]
    assert len(set(texts)) == len(texts), "duplicate texts in the cases file"
    for source in SECRET_SOURCES:
        of_source = [c for c in CASES if c.source == source]
        assert sum(bool(c.kinds) for c in of_source) >= 40, source
        assert sum(not c.kinds for c in of_source) >= 5, source
    positives = [c for c in CASES if c.kinds]
    assert {k for c in positives for k in c.kinds} >= REQUIRED_KINDS
    assert all(c.secrets and all(s in c.text for s in c.secrets) for c in positives)
    assert all(set(c.kinds) <= set(KINDS) for c in CASES)


def test_precision_and_recall_over_the_cases_file(capsys: pytest.CaptureFixture[str]) -> None:
    scores = score_secrets_by_source(CASES)
    with capsys.disabled():
        print("".join(f"\n  {score.summary()}" for score in scores.values()))
    for source, (precision, recall) in FLOORS.items():
        score = scores[source]
        detail = (f"{score.summary()}\n  false positives: {list(score.false_positives)}"
                  f"\n  false negatives: {list(score.false_negatives)}")
        assert score.precision >= precision, detail
        assert score.recall >= recall, detail


@pytest.mark.parametrize("case", [c for c in CASES if c.kinds],
                         ids=lambda c: f"line{c.line}")
def test_found_secrets_have_the_labelled_kind_and_leave_no_trace(case: SecretCase) -> None:
    out = redact(case.text)
    if any(secret in out.text for secret in case.secrets):  # counted against recall above
        assert case.note.startswith("honest miss"), f"unexpected miss: {case.text!r}"
        return
    assert set(out.kinds) <= set(KINDS)
    if case.source == "project":  # the scanners' cases label presence, not our kinds
        assert list(out.kinds) == list(case.kinds), case.note
    for kind in out.kinds:
        assert MARK.format(kind=kind) in out.text
    for secret in case.secrets:
        # nor any long piece of it (a partial replacement would leak the rest)
        assert all(secret[i : i + 12] not in out.text for i in range(0, len(secret) - 12, 6))


@pytest.mark.parametrize("case", [c for c in CASES if not c.kinds],
                         ids=lambda c: f"line{c.line}")
def test_negatives_are_left_untouched(case: SecretCase) -> None:
    if redact(case.text).text != case.text:  # counted against precision above
        assert case.note.startswith("honest false positive"), case.text


def test_only_the_secret_part_is_replaced() -> None:
    out = redact("DATABASE_URL=postgres://app:Xk29fLq8vB@db.internal:5432/app")
    assert out.text == "DATABASE_URL=postgres://app:[REDACTED:url_password]@db.internal:5432/app"
    out = redact('curl -H "Authorization: Bearer 9fQ2xL7mKp3RtY8wZ1vB" https://api')
    assert out.text == 'curl -H "Authorization: Bearer [REDACTED:auth_header]" https://api'


def test_several_secrets_are_replaced_in_text_order() -> None:
    token, key = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "AKIA" + "Z7Q3K9X2M4P8R6T1"
    out = redact(f"first {key}, then {token}, then {key} again")
    assert out.kinds == ("aws_access_key", "github_token", "aws_access_key")
    assert out.text == ("first [REDACTED:aws_access_key], then [REDACTED:github_token], "
                        "then [REDACTED:aws_access_key] again")


AWS_DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example


@pytest.mark.parametrize("text", [
    f"export AWS_SECRET_ACCESS_KEY={AWS_DOC_SECRET}",
    f'aws_secret_access_key: "{AWS_DOC_SECRET}"',
    f"keys: AKIAZ7Q3K9X2M4P8R6T1 / {AWS_DOC_SECRET}",
    f"{AWS_DOC_SECRET} goes with AKIAZ7Q3K9X2M4P8R6T1",
])
def test_an_aws_secret_key_is_redacted_whatever_it_holds(text: str) -> None:
    """A value assigned to a secret's name is one, EXAMPLE in it or not; so are the 40
    base64 characters written next to a key id."""
    assert AWS_DOC_SECRET not in redact(text).text


def test_the_secret_next_to_a_key_id_is_base64_not_a_hex_digest() -> None:
    digest = "3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
    out = redact(f"AKIAZ7Q3K9X2M4P8R6T1 {AWS_DOC_SECRET}, rotated in commit {digest}")
    assert out.text == ("[REDACTED:aws_access_key] [REDACTED:aws_secret_key], rotated in "
                        f"commit {digest}")


@pytest.mark.parametrize("length", [20, 30, 36, 40, 64])
def test_provider_tokens_of_any_length_in_range_are_redacted(length: int) -> None:
    """The documented length is not required, a random body is: the prefix before
    words or inside an identifier is not a token."""
    body = ("Xq7Rt2Vb9Kz4Mn8Pw3Lc6Hs1Jd5Fy0Ga2Ue7" * 2)[:length]
    for prefix in ("npm_", "ghp_", "glpat-", "hf_"):
        out = redact(f"use {prefix}{body} for the release")
        assert out.text == f"use [REDACTED:{out.kinds[0]}] for the release", prefix
    for text in ("npm_config_cache=/tmp/npm", "echo $npm_package_version",
                 "sk-learn-pipelines-and-transformers-here", "use hf_hub_download for models"):
        assert redact(text).count == 0, text


# (a line holding a secret, the secret, a line that holds none)
PASSWORD_CASES = [
    ("password: correct horse battery staple", "correct horse battery staple",
     "Password: see the vault for the one we use"),
    ("db:\n  password: maroon otter cobalt lantern\n", "maroon otter cobalt lantern",
     "the password is incorrect, try again"),
    ('DB_PASSWORD="violet tundra ferry anchor"', "violet tundra ferry anchor",
     "password_min_length: 12"),
    ("passphrase = mauve-otter-cobalt-lantern", "mauve-otter-cobalt-lantern",
     "password = user_password"),
    ("--password hunter22 --user admin", "hunter22", "secret: ${DB_SECRET}"),
    ("client_secret: blue-harbor-lamp", "blue-harbor-lamp", "api_key: YOUR_API_KEY_HERE"),
    ("token: correcthorse", "correcthorse", "password: str = Field(min_length=8)"),
]


@pytest.mark.parametrize(("line", "secret", "plain"), PASSWORD_CASES)
def test_a_password_assigned_is_redacted_whatever_it_looks_like(line: str, secret: str,
                                                                 plain: str) -> None:
    """Any literal assigned to a password, secret or token name is a secret: words, no
    digits, EXAMPLE in it; prose, settings about it, references, placeholders are not."""
    assert secret not in redact(line).text
    assert redact(plain).text == plain


def test_a_secret_is_redacted_everywhere_it_occurs_in_the_text() -> None:
    out = redact("DB_PASSWORD=Zr8qLw2mXv5n and later the same Zr8qLw2mXv5n in a log line")
    assert "Zr8qLw2mXv5n" not in out.text and out.count == 2


def test_redaction_is_idempotent_over_the_cases() -> None:
    for case in CASES:
        once = redact(case.text)
        assert redact(once.text).count == 0, case.text


def test_extra_patterns_redact_group_one_or_the_whole_match() -> None:
    extra = compile_extra([r"acme_[0-9a-f]{16}", r"ticket-pin: (\d{6})"])
    out = redact("key acme_0123456789abcdef and ticket-pin: 482913 ok", extra)
    assert out.text == "key [REDACTED:custom] and ticket-pin: [REDACTED:custom] ok"
    assert redact("key acme_0123456789abcdef").count == 0  # not a built-in shape


@pytest.mark.parametrize(("source", "message"), [("(unclosed", "invalid secret pattern"),
                                                 ("x*", "matches the empty string")])
def test_bad_extra_patterns_are_rejected_naming_them(source: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        compile_extra([source])
    assert repr(source) in str(info.value)


def test_spans_are_disjoint_and_ordered() -> None:
    text = "export GITHUB_TOKEN=ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5 x=1"
    spans = find_secrets(text)
    assert [s.kind for s in spans] == ["github_token"]  # the shape wins over the assignment
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))


_BAIT = st.sampled_from([
    "ghp_", "AKIA", "sk-", "eyJ", ".", "-----BEGIN RSA PRIVATE KEY-----", "-----END ",
    "PRIVATE KEY-----", "://", ":", "@", "Bearer ", "Authorization: ", "password=",
    "TOKEN=", "a1B2c3D4e5F6g7H8", "\n", " ", "'", '"', "=", "_", "-", "\ud800", "\x00",
    "x" * 300, "9" * 50,
])
_TEXT = st.one_of(st.text(max_size=400), st.lists(_BAIT, max_size=60).map("".join))


@settings(database=None, deadline=None, max_examples=300,
          suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT)
@example(text="-----BEGIN RSA PRIVATE KEY-----" * 2000)
@example(text="ghp_" * 50_000)
@example(text="a://b:c@" * 20_000)
def test_redaction_never_raises_and_only_replaces_spans(text: str) -> None:
    out = redact(text)
    spans = find_secrets(text)
    assert out.count == len(spans)
    rebuilt, pos = [], 0
    for span in spans:
        assert 0 <= span.start < span.end <= len(text) and span.start >= pos
        rebuilt.append(text[pos : span.start] + MARK.format(kind=span.kind))
        pos = span.end
    assert out.text == "".join(rebuilt) + text[pos:]


# Long single-line inputs that each drive one of the detectors hard: a prefix run into
# its own body, passphrase lines, option names, key ids with secrets, values stated
# after a secret word, needles of the pattern shapes.
_BAIT = {
    "prefix-run": "sk-", "passphrase": "password: correct horse\n", "option": "--password ",
    "aws-pair": "AKIAZ7Q3K9X2M4P8R6T1 ", "stated": "token is a1B2c3D4e5 ", "needles": "a.b|c:d%e.",
}
_SMALL, _LARGE = 40_000, 400_000


def _seconds(unit: str, size: int) -> float:
    text = (unit * (size // len(unit) + 1))[:size]
    times = []
    for _ in range(2):
        start = time.process_time()  # CPU: other work on the machine does not count
        redact(text)
        times.append(time.process_time() - start)
    return min(times)


@pytest.mark.slow
@pytest.mark.parametrize("unit", list(_BAIT.values()), ids=list(_BAIT))
def test_redaction_time_grows_linearly(unit: str) -> None:
    """10x the input, about 10x the time (a quadratic path would show ~100x); a ratio,
    so a slow machine cannot fail it."""
    ratio = _seconds(unit, _LARGE) / max(_seconds(unit, _SMALL), 1e-6)
    assert ratio < 30, f"t(400KB)/t(40KB) = {ratio:.1f} for {unit!r}"


def test_ordinary_project_text_is_left_alone() -> None:
    """Out of sample: the README and docs/, the decision/blocker cases and this project's
    own source hold no credentials, so nothing in them may be redacted."""
    root = Path(__file__).resolve().parents[3]
    texts = [doc.read_text(encoding="utf-8")
             for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]]
    texts += [c.text for c in load_cases()]
    for package in ("stenographer", "graphs", "nodes", "store", "constants"):
        texts += [p.read_text(encoding="utf-8") for p in sorted((root / package).rglob("*.py"))]
    found = [(s.kind, text[s.start : s.end]) for text in texts for s in find_secrets(text)]
    assert found == []
