"""Precision, recall and F1 of model-free extraction on the labelled cases file.

Run from the repository root::

    python bench/extraction_quality.py [--misses] [path/to/cases.jsonl]

The tests in ``tests/nodes/extract/test_signals.py`` import ``load_cases`` and
``evaluate`` from here, so the figures they assert are the figures printed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from nodes.extract.signals import blockers, decisions  # noqa: E402

__all__ = ["CASES_PATH", "Case", "Score", "evaluate", "load_cases", "main"]

CASES_PATH = REPO_ROOT / "tests" / "nodes" / "extract" / "signal_cases.jsonl"


@dataclass(frozen=True)
class Case:
    """One labelled sentence (or short text) from the cases file."""

    text: str
    decision: bool
    blocker: bool
    note: str = ""
    line: int = 0


@dataclass(frozen=True)
class Score:
    """Confusion counts for one signal kind, with the usual ratios."""

    name: str
    tp: int
    fp: int
    fn: int
    tn: int
    false_positives: tuple[str, ...] = ()  # the texts
    false_negatives: tuple[str, ...] = ()

    @classmethod
    def tally(cls, name: str, outcomes: Iterable[tuple[bool, bool, str]]) -> Score:
        """Count ``(predicted, expected, text)`` outcomes."""
        tp = fp = fn = tn = 0
        fps: list[str] = []
        fns: list[str] = []
        for predicted, expected, text in outcomes:
            if predicted and expected:
                tp += 1
            elif predicted:
                fp += 1
                fps.append(text)
            elif expected:
                fn += 1
                fns.append(text)
            else:
                tn += 1
        return cls(name, tp, fp, fn, tn, tuple(fps), tuple(fns))

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def summary(self) -> str:
        return (f"{self.name:<18} precision={self.precision:.3f} recall={self.recall:.3f} "
                f"f1={self.f1:.3f}  (tp={self.tp} fp={self.fp} fn={self.fn} tn={self.tn})")


def load_cases(path: Path = CASES_PATH) -> list[Case]:
    """Read the JSON-lines cases file; blank lines are skipped."""
    cases: list[Case] = []
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            obj = json.loads(raw)
            cases.append(
                Case(
                    text=obj["text"],
                    decision=bool(obj["decision"]),
                    blocker=bool(obj["blocker"]),
                    note=obj.get("note", ""),
                    line=number,
                )
            )
    return cases


def evaluate(cases: Sequence[Case]) -> dict[str, Score]:
    """Score ``decisions`` and ``blockers`` against the labels of ``cases``."""
    kinds: dict[str, tuple[Callable[[str], list[str]], Callable[[Case], bool]]] = {
        "decision": (decisions, lambda case: case.decision),
        "blocker": (blockers, lambda case: case.blocker),
    }
    return {kind: Score.tally(kind, ((bool(extract(c.text)), label(c), c.text) for c in cases))
            for kind, (extract, label) in kinds.items()}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    show_misses = "--misses" in args
    paths = [arg for arg in args if arg != "--misses"]
    path = Path(paths[0]) if paths else CASES_PATH
    cases = load_cases(path)
    print(f"{len(cases)} cases from {path}")
    print(
        f"  labelled decisions: {sum(c.decision for c in cases)}, "
        f"blockers: {sum(c.blocker for c in cases)}, "
        f"neither: {sum(not c.decision and not c.blocker for c in cases)}"
    )
    for score in evaluate(cases).values():
        print(score.summary())
        if show_misses:
            for text in score.false_positives:
                print(f"    false positive: {text}")
            for text in score.false_negatives:
                print(f"    false negative: {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
