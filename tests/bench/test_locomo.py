"""The LoCoMo retrieval harness (bench/locomo.py) on a small synthetic file in the same
format (locomo-mini.json, written for these tests): parsing, scoring, and one real run
through the stdio server."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from bench import locomo

MINI = Path(__file__).with_name("locomo-mini.json")


def test_locomo_dates_become_iso_utc():
    assert locomo.parse_locomo_date("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00Z"
    assert locomo.parse_locomo_date("12:09 am on 13 September, 2023") == "2023-09-13T00:09:00Z"
    assert locomo.parse_locomo_date("12:30 pm on 1 Jan, 2024") == "2024-01-01T12:30:00Z"
    assert locomo.parse_locomo_date("10:37 AM on 27 June, 2023") == "2023-06-27T10:37:00Z"
    for bad in ("", "yesterday", "25:00 pm on 1 May, 2023", "1:00 pm on 31 February, 2023",
                "1:00 pm on 3 Smarch, 2023"):
        assert locomo.parse_locomo_date(bad) is None, bad


def test_turn_content_names_the_speaker_and_the_shared_image():
    assert locomo.turn_content({"speaker": "Ada", "text": "Hello."}) == "Ada: Hello."
    assert locomo.turn_content({"speaker": "Bo", "text": "Look!", "blip_caption": "a cat",
                                "query": "cat photo"}) == "Bo: Look! [image: a cat]"


def test_evidence_entries_may_hold_several_ids():
    assert locomo.evidence_ids(["D8:6; D9:17", "D1:3", "D1:3", "D 2"]) == (
        "D8:6", "D9:17", "D1:3")
    assert locomo.evidence_ids([]) == ()


def test_conversations_load_in_session_order_with_roles_and_dates():
    first, second = locomo.load_conversations(MINI)
    assert first.sample_id == "mini-1" and second.sample_id == "mini-2"
    assert [t.dialog_id for t in first.turns] == [
        "D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3", "D10:1", "D10:2"]
    assert [t.role for t in first.turns[:4]] == ["user", "assistant", "user", "assistant"]
    assert first.turns[3].content == ("Bo: Here is my sourdough starter. "
                                      "[image: a photo of a jar of bubbling dough]")
    assert first.turns[0].created_at == "2024-03-03T09:05:00Z"
    assert first.turns[-1].created_at == "2024-05-01T00:15:00Z"
    assert [q.category for q in first.questions] == [4, 2, 1, 3, 4, 4]  # no category 5
    assert first.questions[2].evidence == ("D1:4", "D10:1")


def test_scores_of_one_ranking():
    scores = locomo.question_scores([5, 9, 2, 7], [2, 7, 11], ks=(1, 2, 4))
    assert scores == {"recall@1": 0.0, "hit@1": 0.0, "recall@2": 0.0, "hit@2": 0.0,
                      "recall@4": pytest.approx(2 / 3), "hit@4": 1.0, "mrr": 1 / 3}
    summary = locomo.summarize_scores([{"mrr": 1.0}, {"mrr": 0.5}])
    assert summary == {"questions": 2, "mrr": 0.75}


def test_a_run_through_the_stdio_server(tmp_path: Path):
    report = anyio.run(lambda: locomo.run_benchmark(MINI, limit=10, work_dir=tmp_path))
    assert report["conversations"] == 2 and report["turns"] == 11
    assert report["questions"] == 7  # asked: categories 1-4, with or without evidence
    assert report["counts"] == {"no_evidence": 2, "unknown_evidence_ids": 1, "no_result": 0,
                                "evidence_not_compressed": 0}
    overall = report["retrieval"]["overall"]
    assert overall["questions"] == 5
    assert overall["recall@5"] == 1.0 and overall["hit@1"] >= 0.8
    assert set(report["retrieval"]) == {"overall", "1 multi-hop", "2 temporal",
                                        "3 open-domain", "4 single-hop"}
    assert report["search_latency_ms"]["server_p50"] > 0
    assert report["ingest"]["turns_per_s"] > 0
    # mini-1 has 9 turns: the first 8 are one brief; D10:2 stays live.
    briefs = report["guard"]["briefs"]["overall"]
    assert briefs["questions"] == 4 and briefs["recall@1"] == 1.0
    assert report["guard"]["counts"]["no_evidence"] == 3  # mini-2 is not compressed
    assert report["guard"]["counts"]["evidence_not_compressed"] == 1
    text = locomo.render(report)
    assert "evidence turns (stenographer_query_history)" in text
    assert "evidence briefs (stenographer_compact_guard)" in text


def test_the_command_line_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "report.json"
    assert locomo.main(["--data", str(MINI), "--no-guard", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert "guard" not in report and report["retrieval"]["overall"]["recall@10"] == 1.0
    assert "recall@10" in capsys.readouterr().out
