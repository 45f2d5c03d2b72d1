"""Pattern sets for model-free extraction of decisions and blockers.

A sentence is a *decision* or a *blocker* when one of its cue patterns matches and
the cue is *live*: no negation or hypothetical stands in the clause before it
("no errors", "if the upload fails", "we haven't decided") and, for blockers, no
resolution follows it ("was fixed by", "but now pass"). The windows around a cue
are cut by ``nodes.extract.signals``; this module only holds the regexes.

Why the patterns look the way they do:

* Every cue is a bounded alternation of literal words fenced by ``\\b`` (the
  original extractor had no word boundaries and found "bug" in "debug"). Gaps are
  bounded character classes such as ``[^.!?\\n]{0,30}``; there are no nested
  unbounded quantifiers, so matching cost is linear in the sentence length, and
  the splitter caps sentences at 1,000 characters anyway.
* Sentences reach the regexes whitespace-collapsed with typographic apostrophes
  folded to ``'``, so a literal space and ``'`` are enough.
* A pattern may name a group ``cue``: the negation window then ends where the cue
  starts rather than where the match starts, so the verb and gap of "shows no
  errors" are inspected too.

User patterns (``compile_patterns(extra_decisions=..., extra_blockers=...)``) are
compiled with the same flags (case-insensitive) and pass the same negation,
question and resolution filters as the built-in ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BLOCKER_TRIGGERS",
    "BLOCKER_TRIGGER_ENDINGS",
    "BLOCKER_TRIGGER_MARKS",
    "DECISION_TRIGGERS",
    "DECISION_TRIGGER_MARKS",
    "DEFAULT_PATTERNS",
    "FIX_VERBS",
    "SignalPatterns",
    "compile_patterns",
]

_FLAGS = re.IGNORECASE

# Verbs that make a choice; "decide"/"choose" (present, infinitive) are left out
# because they introduce open questions ("let's decide tomorrow").
_DECISION_CUES: tuple[str, ...] = (
    r"\b(?:decided|chose|chosen|opted|settled (?:on|for)|went with|agreed (?:to|on|that)"
    r"|we agreed|concluded that|we concluded)\b",
    # "cherry-picked" and "picked up the ticket" are not choices.
    r"(?<![-\w])picked\b(?! up\b)",
    r"\b(?:going|sticking) with\b",
    r"\b(?:we'll|we will|i'll|i will|let's|let us|we're going to|we are going to"
    r"|i'm going to|i am going to) (?:go with|stick with|use|adopt|switch to|move to"
    r"|standardi[sz]e on|settle on)\b",
    # Labelled conclusions: "Decision:", "Decision (ADR-7):", "Key finding:", "Verdict —".
    r"\b(?:decisions?|resolution|conclusion|verdict|takeaway|outcome|insight|finding"
    r"|key (?:finding|insight|takeaway|learning|result)|final (?:call|answer|choice))"
    r"(?: \([^()\n]{1,24}\))? ?[:—–]",
    r"\b(?:the|our|my|final|team's) (?:decision|choice) (?:is|was|has been) (?:to|that)\b",
    r"\bmade (?:the|a|our|this|that) (?:final )?decision\b|\bdecision (?:was|has been) made\b",
    # Arrows read as a conclusion only in three shapes; "parse → validate → store"
    # and "client -> server" are flows, "the -> operator" is syntax.
    #   "Use FTS5 → simpler."
    r"\A(?:use|go with|pick|choose|switch to|keep|drop|adopt|prefer|stick with|move to"
    r"|replace)\b[^→>\n]{0,80}(?<! the)(?<! an)(?<! a) (?:→|->|=>) ",
    #   "Redis vs Memcached → Redis"
    r"\b(?:vs\.?|versus) [^→>\n]{1,60} (?:→|->|=>) ?\w",
    #   "Benchmarks are done → use FTS5"
    r"(?:→|->|=>) ?(?:decision|decided|use|go with|going with|pick|picked|chose|choose"
    r"|keep|drop|adopt|switch to|winner|stick with)\b",
)

# Screening: every built-in decision cue needs one of these words (or an arrow), so a
# turn without any of them is skipped at the cost of one tokenisation instead of a
# regex scan per cue (most turns hold no cue). A test checks over the labelled cases
# and random text that the screen never hides a sentence the cues would find; a new
# cue must add its necessary word here.
DECISION_TRIGGERS = frozenset(
    """decided chose chosen opted settled went agreed concluded picked going sticking
    we'll i'll let's let will decision decisions resolution conclusion verdict takeaway
    outcome insight finding key final choice""".split()
)
DECISION_TRIGGER_MARKS = ("→", "->", "=>")

# Words in the clause before a decision cue that make it hypothetical, negated or
# still open.
_DECISION_NEGATION = (
    r"\b(?:not|never|no|nobody|nothing|no one|haven't|hasn't|hadn't|didn't|don't|doesn't"
    r"|isn't|wasn't|aren't|weren't|won't|yet to|if|unless|whether|once|until|should"
    r"|would|could|might|may|must|need to|needs to|have to|has to|randomly|arbitrarily)\b"
)

# Exception class names are case-sensitive so "error" in prose is not one.
_EXCEPTION_CLASS = r"(?-i:[A-Z][A-Za-z0-9_]{0,30}(?:Error|Exception|Fault|Exit|Interrupt))"
# Nouns that, after a reporting verb, describe a problem that happened.
_PROBLEM_NOUN = (
    r"(?:errors?|exceptions?|timeouts?|crash(?:es)?|segfaults?|tracebacks?|bugs?|issues?"
    r"|problems?|panics?|" + _EXCEPTION_CLASS + ")"
)

_BLOCKER_CUES: tuple[str, ...] = (
    # "unblocked" and "non-blocking" are the opposite.
    r"(?<![-\w])(?:blocked|stuck|blockers?)\b",
    r"\bblocking (?:the|us|me|our|my|this|release|deploy|deployment|merge|progress|ci|pr)\b",
    # "you cannot call this twice" states a rule; "cannot be empty" validates input.
    r"(?<!you )(?<!one )\b(?:can't|cannot|can not|couldn't|could not|unable to|refuses? to"
    r"|refused to)\b(?! (?:wait|hurt|go wrong|stress|emphasi[sz]e|overstate|be (?:null|none"
    r"|empty|blank|negative|zero|changed|modified|undone|overstated|combined|mixed|longer"
    r"|shorter|more|less|greater|larger|smaller)\b))",
    r"\b(?:won't|will not|doesn't|does not|didn't|did not) (?:start|build|compile|load"
    r"|connect|run|boot|install|import|open|resolve|respond)\b",
    r"\b(?:fails|failing|failed)\b",
    # Report labels: "Error: database is locked", "FATAL:", "TypeError: ...".
    r"\b(?:errors?|exceptions?|failures?|fatal|panic|traceback) ?:",
    r"\b" + _EXCEPTION_CLASS + r"\b ?:",
    r"\b(?P<cue>errors?|exceptions?|" + _EXCEPTION_CLASS + r")\b (?:occurred|occurs"
    r"|happened|happens|persists|persisted|again|keeps|kept|when|while|during"
    r"|on startup|at startup|on import|on line|at line|in line)\b",
    r"\b(?:got|get|getting|gets|hit|hits|hitting|seeing|saw|throws|threw|throwing|thrown"
    r"|raised|returned|returning|giving|gave|produced|reports|reported|reporting|logged"
    r"|shows|showed|showing|found|ran into|run into|running into|runs into|there's"
    r"|there is|there are|there was|there were|died with|dies with|blew up with"
    r"|blows up with|crashed with|crashes with|failed with|fails with|exited with"
    r"|exits with)\b[^.!?\n]{0,30}?\b(?P<cue>" + _PROBLEM_NOUN + r")\b",
    r"\bcrash(?:ed|es|ing)\b",
    # "crash reporter", "crash-safe" and "crash recovery" are topics, not incidents.
    r"\bcrash\b(?!(?: ?-| (?:report|reporter|reports|reporting|recovery|safe|safety"
    r"|course|test|tests|handler|handlers|dump|dumps|only|consistency|consistent)\b))",
    r"\b(?:timed|times|timing) out\b|\btimed-out\b|\bdeadline exceeded\b|\betimedout\b"
    r"|\bgateway time-?out\b|\btimeouts? (?:error|errors|exceeded|expired|again)\b",
    r"\btraceback\b",
    r"\b(?:doesn't|does not|don't|do not|didn't|did not|isn't|is not|aren't|are not"
    r"|wasn't|was not|won't|will not|stopped|no longer|not|never) work(?:s|ing|ed)?\b"
    r"(?! (?:around|on)\b)",
    # "broken-link checker" is a name; "line breaks" are not breakage.
    r"\b(?:broken|broke)\b(?!-)|\bbreaks (?:the|on|when|with|in|our|my|ci|everything"
    r"|prod|production)\b",
    r"\b(?:hangs|hung|deadlock|deadlocks|deadlocked|freezes|froze|segfaults?|segfaulted"
    r"|segmentation fault|core dumped|out of memory|oom|oomkilled|oom-killed"
    r"|permission denied|access denied|connection refused|connection reset"
    r"|no such file or directory|command not found|module not found|merge conflicts?"
    r"|rate-limited|rate limited|rate limit exceeded|flaky|flakes|flaking|panicked"
    r"|kernel panic|regressed|is red|went red|turned red)\b",
    r"\b(?:is|are|was|were|keeps|kept|still) hanging\b",
    r"\bexit(?:ed|s)? (?:with )?(?:code|status) [1-9][0-9]{0,2}\b|\bnon-zero exit\b"
    r"|\bexited non-zero\b",
    r"[✗✘❌🚫⛔]",
)

# Screening words of the blocker cues (see DECISION_TRIGGERS); exception class names
# are caught by their endings.
BLOCKER_TRIGGERS = frozenset(
    """blocked stuck blocker blockers blocking can't cannot can couldn't could unable
    refuse refuses refused won't will doesn't does didn't did not fails failing failed
    error errors exception exceptions failure failures fatal panic panics panicked
    traceback tracebacks timeout timeouts crash crashes crashed crashing segfault
    segfaults segfaulted bug bugs issue issues problem problems timed times timing
    deadline etimedout gateway work works working worked broken broke breaks hangs hung
    hanging deadlock deadlocks deadlocked freezes froze segmentation dumped memory oom
    oomkilled denied reset such found conflict conflicts rate flaky flakes flaking
    regressed red exit exited exits non isn't aren't wasn't don't stopped longer never
    kernel""".split()
)
BLOCKER_TRIGGER_ENDINGS = ("error", "exception", "fault", "exit", "interrupt")
BLOCKER_TRIGGER_MARKS = ("✗", "✘", "❌", "🚫", "⛔")

# Words in the clause before a blocker cue that negate it, resolve it, or make it
# hypothetical or a piece of design ("retry failed uploads", "catch the KeyError").
_BLOCKER_NEGATION = (
    r"\b(?:no(?! idea\b)|not(?! sure\b)|never|none|nothing|nobody|neither|nor|without"
    r"|zero|no longer|fixed|fixes|fixing|fix for|resolved|resolves|resolving|solved"
    r"|solves|unblocked|handle|handles|handled|handling|catch|catches|caught|avoid|avoids"
    r"|avoided|prevent|prevents|prevented|if|unless|whether|when|whenever|in case"
    r"|instead of|rather than|retry|retries|retrying|raise|might|may|could|would|should"
    r"|shouldn't|wouldn't|won't|isn't|aren't|wasn't|weren't|doesn't|don't|didn't|hasn't"
    r"|haven't|expect|expects|expected|assert|asserts|test that|tests that|verify"
    r"|ensure|make sure)\b"
    # "0 failed" is a clean run; "v1.0 crashed" is not.
    r"|(?<![\w.])0\b"
)

# Text right after a blocker cue that says it is over or is a handled case.
_BLOCKER_RESOLUTION = (
    r"\A ?:? ?(?:0|none|zero|nil)\b"
    r"|\b(?:is|are|was|were|been|be|now|got|get)(?: now)? (?:fixed|resolved|solved|gone"
    r"|addressed|patched|retried|handled|caught|ignored|expected)\b"
    r"|'s (?:now )?(?:fixed|resolved|solved|gone)\b"
    r"|\b(?:fixed|resolved|solved|patched) (?:by|in|with|via|now)\b"
    r"|\bnow pass(?:es|ing)?\b|\bsince the fix\b|\bwent away\b|\bdisappeared\b"
)

# The verbs that say something was fixed: a GraphRAG ``fixes`` edge
# (``nodes.extract.relations``) and a blocker's end (``nodes.extract.resolutions``).
FIX_VERBS = "fix|fixes|fixed|fixing|resolves|resolved|patches|patched"

# A sentence ending in "?" that opens like this asks whether something failed; it
# does not report that it did. "Why is CI failing?" still reports a failure.
_YES_NO_QUESTION = (
    r"\A(?:did|does|do|is|are|was|were|will|would|could|can|should|shall|has|have|had"
    r"|might|may|what if|what happens if|any)\b"
)


@dataclass(frozen=True)
class SignalPatterns:
    """Compiled cue, negation and resolution regexes for both signal kinds.

    ``decision`` and ``blocker`` hold the built-in cues followed by the user's.
    """

    decision: tuple[re.Pattern[str], ...]
    blocker: tuple[re.Pattern[str], ...]
    decision_negation: re.Pattern[str]
    blocker_negation: re.Pattern[str]
    blocker_resolution: re.Pattern[str]
    yes_no_question: re.Pattern[str]
    n_builtin_decisions: int = len(_DECISION_CUES)
    n_builtin_blockers: int = len(_BLOCKER_CUES)


def compile_patterns(
    extra_decisions: Sequence[str] = (), extra_blockers: Sequence[str] = ()
) -> SignalPatterns:
    """Compile the built-in patterns plus user-supplied decision and blocker regexes.

    Extra patterns use Python ``re`` syntax and are matched case-insensitively.
    Raises ``ValueError`` naming the pattern when one does not compile or matches
    the empty string (it would flag every sentence).
    """
    return SignalPatterns(
        decision=_compile_cues(_DECISION_CUES, extra_decisions, "decision"),
        blocker=_compile_cues(_BLOCKER_CUES, extra_blockers, "blocker"),
        decision_negation=re.compile(_DECISION_NEGATION, _FLAGS),
        blocker_negation=re.compile(_BLOCKER_NEGATION, _FLAGS),
        blocker_resolution=re.compile(_BLOCKER_RESOLUTION, _FLAGS),
        yes_no_question=re.compile(_YES_NO_QUESTION, _FLAGS),
    )


def _compile_cues(
    builtin: Sequence[str], extra: Sequence[str], kind: str
) -> tuple[re.Pattern[str], ...]:
    if isinstance(extra, str):
        # A bare string is a Sequence[str] of characters; compiling each would fail
        # with a confusing message or, worse, succeed.
        raise ValueError(
            f"extra {kind} patterns must be a sequence of regexes, got the single string "
            f"{extra!r}; wrap it in a list"
        )
    compiled = [re.compile(source, _FLAGS) for source in builtin]
    compiled.extend(_compile_extra(source, kind) for source in extra)
    return tuple(compiled)


def _compile_extra(source: str, kind: str) -> re.Pattern[str]:
    if not isinstance(source, str):
        raise ValueError(
            f"extra {kind} pattern must be a string (a Python regex), got {type(source).__name__}"
        )
    try:
        pattern = re.compile(source, _FLAGS)
    except re.error as exc:
        raise ValueError(
            f"invalid extra {kind} pattern {source!r}: {exc}; expected a Python `re` regex"
        ) from exc
    if pattern.search("") is not None:
        raise ValueError(
            f"invalid extra {kind} pattern {source!r}: it matches the empty string and "
            "would flag every sentence; anchor it to a word, e.g. r'\\bLGTM\\b'"
        )
    return pattern


DEFAULT_PATTERNS = compile_patterns()
