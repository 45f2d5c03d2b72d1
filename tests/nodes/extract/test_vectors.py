"""A turn's vector bytes, two ways: numpy's (``quantize(text_vector(...))``) and plain
Python's (``_plain_bytes``), which a process uses for its first turns so that it need not
import numpy. The two must give the same bytes for every text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.extract import vectors
from nodes.extract.vectors import MAX_VECTOR_CHARS, quantize, text_vector

REPO_ROOT = Path(__file__).resolve().parents[3]
CASES = Path(__file__).with_name("signal_cases.jsonl")


def both(text: str, dim: int, previous: list[str]) -> tuple[bytes, bytes]:
    return quantize(text_vector(text, dim, previous)), vectors._plain_bytes(text, dim, previous)


def test_the_plain_way_gives_numpys_bytes_for_the_labelled_turns() -> None:
    """Each labelled turn of the signal cases, with the two before it as its context."""
    texts = [json.loads(line)["text"] for line in CASES.read_text().splitlines() if line]
    assert len(texts) > 200
    for dim in (128, 64, 7):
        for i, text in enumerate(texts):
            numpy_bytes, plain = both(text, dim, texts[max(0, i - 2):i][::-1])
            assert plain == numpy_bytes, (dim, text)
            assert len(plain) == dim


def test_the_plain_way_gives_numpys_bytes_at_the_edges() -> None:
    word = "deploy "
    cases = [
        ("", []),  # no words: all zeros
        ("the and of", []),  # stop words only
        ("Yes, twice.", ["Did the kubernetes upgrade finish?"]),  # a context lent
        ("retry " * 50 + "cache cache", []),  # repeated words: log-weighted counts
        ("x" * 200, []),  # a word cut at 64 characters
        ("café naïve 東京 \ud800 emoji 🚀", []),  # non-ASCII, a lone surrogate
        (word * (MAX_VECTOR_CHARS // len(word) + 500), []),  # past MAX_VECTOR_CHARS
        ("one", ["two", "three", "four"]),  # only two turns before count
        ("", ["the deploy failed", "rollback done"]),  # no words of its own
    ]
    for text, previous in cases:
        for dim in (128, 3):
            numpy_bytes, plain = both(text, dim, previous)
            assert plain == numpy_bytes, (text[:40], previous, dim)
    assert vectors._plain_bytes("", 128) == bytes(128)


WORDS = st.sampled_from(["deploy", "deploys", "cache", "the", "TICKET-42", "db_pool",
                         "x", "rollback", "ünïcode", "v2.7.8", "a", "ok"])
TEXTS = st.one_of(st.lists(WORDS, max_size=60).map(" ".join), st.text(max_size=300))


@settings(max_examples=400, deadline=None)
@given(text=TEXTS, previous=st.lists(TEXTS, max_size=3),
       dim=st.sampled_from([128, 64, 16, 1]))
def test_the_plain_way_gives_numpys_bytes(text: str, previous: list[str], dim: int) -> None:
    numpy_bytes, plain = both(text, dim, previous)
    assert plain == numpy_bytes


def run_python(code: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_process_vectorises_its_first_turns_without_numpy_then_imports_it() -> None:
    found = run_python("""
import json, sys
from nodes.extract import vectors as v
v._plain_left[0] = 2
first = [v.turn_bytes(t, 128, ["the deploy failed"]) for t in ("rollback the cache", "ok")]
before = "numpy" in sys.modules
third = v.turn_bytes("rollback the cache", 128, ["the deploy failed"])
print(json.dumps({"before": before, "after": "numpy" in sys.modules,
                  "same": first[0] == third, "left": v._plain_left[0]}))
""")
    assert found == {"before": False, "after": True, "same": True, "left": 0}


def test_a_new_process_answers_its_first_ingest_without_importing_numpy(tmp_path: Path) -> None:
    """numpy's import is most of what a new server's first ingest costs; the turn is
    stored with its vector all the same."""
    found = run_python(f"""
import json, sys
from pathlib import Path
from stenographer.app import open_app
from stenographer.settings import Settings
app = open_app(Settings(data_dir=Path({str(tmp_path)!r})))
out, _ = app.run("ingest", {{"role": "user", "session_id": "s1",
                            "content": "We decided to keep the cache warm on deploy."}})
with app.store.read() as conn:
    stored = [bytes(b).hex() for b, in conn.execute("SELECT embedding FROM exchange_vectors")]
print(json.dumps({{"numpy": "numpy" in sys.modules, "vectors": stored,
                  "reply": out["reply"]["text"]}}))
app.close()
""")
    assert found["numpy"] is False
    assert found["vectors"] == [quantize(text_vector(
        "We decided to keep the cache warm on deploy.", 128)).hex()]
    assert str(found["reply"]).startswith("Ingested [user] #1")
