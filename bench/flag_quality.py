"""Precision and recall of secret redaction and NAFE flags on their labelled cases files.

Run from the repository root::

    python bench/flag_quality.py [--misses]

The tests (``tests/nodes/extract/test_secrets.py``, ``test_nafe.py``) import the loaders
and scorers from here, so the figures they assert are the figures printed.

* Secrets (``secret_cases.jsonl``: text, expected kinds, the secret substrings, and for
  cases taken from a secret scanner's published rules or test fixtures, their
  ``source``): a positive case is found when every listed secret is gone from the
  redacted text; a negative case is a false positive when anything is redacted. Scored
  over the whole file and per source (``project`` is the file's own first cases).
* NAFE (``nafe_cases.jsonl``: text, expected signatures): scored per signature over all
  cases, and overall per case (flagged or not). ``nafe_cases.jsonl`` was written with the
  patterns; ``nafe_heldout_cases.jsonl`` afterwards, and is never tuned against.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.extraction_quality import Score  # noqa: E402
from nodes.extract.nafe import SIGNATURES, nafe_flags_in  # noqa: E402
from nodes.extract.secrets import redact  # noqa: E402

__all__ = [
    "NAFE_CASES_PATH",
    "NAFE_HELDOUT_PATH",
    "SECRET_CASES_PATH",
    "SECRET_SOURCES",
    "FlagCase",
    "Score",
    "SecretCase",
    "load_nafe_cases",
    "load_secret_cases",
    "score_nafe",
    "score_secrets",
    "score_secrets_by_source",
]

CASES_DIR = REPO_ROOT / "tests" / "nodes" / "extract"
SECRET_CASES_PATH = CASES_DIR / "secret_cases.jsonl"
NAFE_CASES_PATH = CASES_DIR / "nafe_cases.jsonl"
# Written after the patterns were settled and never tuned against: an honest estimate.
NAFE_HELDOUT_PATH = CASES_DIR / "nafe_heldout_cases.jsonl"


SECRET_SOURCES = ("project", "gitleaks", "detect-secrets", "trufflehog")


@dataclass(frozen=True)
class SecretCase:
    text: str
    kinds: tuple[str, ...]
    secrets: tuple[str, ...]
    note: str
    line: int
    source: str = "project"  # or the scanner whose rule set or fixtures it comes from


@dataclass(frozen=True)
class FlagCase:
    text: str
    signatures: tuple[str, ...]
    note: str
    line: int


def _lines(path: Path) -> list[tuple[int, dict[str, object]]]:
    with path.open(encoding="utf-8") as handle:
        return [(n, json.loads(raw)) for n, raw in enumerate(handle, start=1) if raw.strip()]


def load_secret_cases(path: Path = SECRET_CASES_PATH) -> list[SecretCase]:
    return [SecretCase(str(o["text"]), tuple(o["kinds"]), tuple(o["secrets"]),  # type: ignore[arg-type]
                       str(o.get("note", "")), n, str(o.get("source", "project")))
            for n, o in _lines(path)]


def load_nafe_cases(path: Path = NAFE_CASES_PATH) -> list[FlagCase]:
    return [FlagCase(str(o["text"]), tuple(o["signatures"]), str(o.get("note", "")), n)  # type: ignore[arg-type]
            for n, o in _lines(path)]


def score_secrets(cases: Sequence[SecretCase], name: str = "secrets (per case)") -> Score:
    """Per case: a case with secrets counts as found when none of them survives; a case
    without counts as a false positive when anything was redacted."""
    def outcome(case: SecretCase) -> tuple[bool, bool, str]:
        out = redact(case.text)
        if case.kinds:
            return all(secret not in out.text for secret in case.secrets), True, case.text
        return out.count > 0, False, case.text
    return Score.tally(name, (outcome(c) for c in cases))


def score_secrets_by_source(cases: Sequence[SecretCase]) -> dict[str, Score]:
    """One score per source of cases (see SECRET_SOURCES), and ``all``."""
    scores = {source: score_secrets([c for c in cases if c.source == source],
                                    f"secrets: {source}") for source in SECRET_SOURCES}
    return {**scores, "all": score_secrets(cases, "secrets: all")}


def score_nafe(cases: Sequence[FlagCase]) -> dict[str, Score]:
    """One score per signature, and ``any`` (a case flagged at all, or not)."""
    found = [{f.signature for f in nafe_flags_in(case.text)} for case in cases]
    return {name: Score.tally(name, (
        (bool(got) if name == "any" else name in got,
         bool(case.signatures) if name == "any" else name in case.signatures, case.text)
        for case, got in zip(cases, found, strict=True)))
        for name in (*SIGNATURES, "any")}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    misses = "--misses" in args
    secret_cases, nafe_cases = load_secret_cases(), load_nafe_cases()
    print(f"{len(secret_cases)} secret cases ({sum(bool(c.kinds) for c in secret_cases)} "
          f"with secrets), {len(nafe_cases)} NAFE cases "
          f"({sum(bool(c.signatures) for c in nafe_cases)} flagged)")
    scores = [*score_secrets_by_source(secret_cases).values(), *score_nafe(nafe_cases).values()]
    heldout = load_nafe_cases(NAFE_HELDOUT_PATH)
    print(f"held-out NAFE cases ({len(heldout)}, never tuned against): "
          f"{score_nafe(heldout)['any'].summary()}")
    for score in scores:
        print(score.summary())
        if misses:
            for text in score.false_positives:
                print(f"    false positive: {text!r}")
            for text in score.false_negatives:
                print(f"    false negative: {text!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
