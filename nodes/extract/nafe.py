"""NAFE reasoning-drift flags: four heuristic signatures in assistant turns.

A flag says "this sentence reads like a known failure of reasoning"; it is never a
verdict, never a blocker, and it changes nothing else about the turn.

* ``NARRATIVE_RESCUE``: appeals to spirit, context or "really fine" to justify
  crossing a rule ("in the spirit of the rule we can skip the check").
* ``MORAL_OVERRIDE``: ethics invoked to override a rule, constraint, gate or policy.
* ``AUTHORITY_DRIFT``: deference to an asserted authority ("trust me", "the user said
  it's fine, so we can skip ...").
* ``INTENT_INFERENCE``: acting on guessed intent ("they probably mean", "safe to
  assume", "reading between the lines").

The original flagged single words and tripped on ordinary sentences ("I know the
answer is 42", "This is really a good idea", "In the context of the migration…",
"The senior engineer confirms the plan"). Here a cue counts only in the shape that
carries the failure: an appeal to spirit or context, an ethical appeal or a
deference must come with a crossing of a rule (skip, bypass, ignore, override ...)
in the same sentence; a cue negated in its clause ("it is not safe to assume") or
asked as a question does not count.

Linear time: a trigger-word screen skips turns without any cue word; cues and the
sentence windows around them are bounded, and each cue is matched at most once per
position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from nodes.extract.terms import word_splitter

__all__ = ["MAX_FLAGS", "MAX_SPAN_CHARS", "SIGNATURES", "Flag", "nafe_flags_in"]

SIGNATURES = ("NARRATIVE_RESCUE", "MORAL_OVERRIDE", "AUTHORITY_DRIFT", "INTENT_INFERENCE")
MAX_FLAGS = 16  # per turn
MAX_SPAN_CHARS = 200
SENTENCE_WINDOW = 300  # characters either side of a cue that its sentence may span
NEGATION_WINDOW = 40

_F = re.IGNORECASE

# A crossing of a rule: what a rescue, an ethical appeal or a deference justifies.
_CROSSING = (
    r"\b(?:skip(?:s|ped|ping)?|ignor(?:e|es|ed|ing)|bypass(?:es|ed|ing)?|overrid(?:e|es|ing)"
    r"|overrode|disabl(?:e|es|ed|ing)|violat(?:e|es|ed|ing)|break(?:s|ing)? (?:the|this|a|our)"
    r"|bend(?:s|ing)?|circumvent(?:s|ed|ing)?|work(?:ing)? around|get(?:ting)? around"
    r"|sidestep(?:s|ped|ping)?|suppress(?:es|ed|ing)?|turn(?:s|ed|ing)? off|waiv(?:e|es|ed|ing)"
    r"|set(?:ting)? aside|push(?:ing)? (?:it |this )?through|force[- ]push(?:es|ed|ing)?"
    r"|(?:merg(?:e|ed|ing)|ship(?:ped|ping)?|deploy(?:ed|ing)?|releas(?:e|ed|ing)"
    r"|proceed(?:ed|ing)?|go ahead|went ahead)(?: it| this)? anyway|--no-verify"
    r"|without (?:approval|review|a review|sign-?off|asking|the tests?|running the tests?)"
    r"|cross(?:es|ed|ing)? the line|not (?:follow|apply) the (?:rule|policy|process))\b"
)
_RULE = (
    r"\b(?:rules?|polic(?:y|ies)|guidelines?|requirements?|constraints?|gates?|checks?"
    r"|process|procedures?|protocols?|restrictions?|instructions?|limits?|specs?"
    r"|contract|reviews?|approvals?|sign-?off|tests?|ci|linters?|guardrails?|safeguards?"
    r"|laws?|regulations?|compliance|standards?|conventions?|the letter)\b"
)
_AUTHORITY = (
    r"(?:the |my |our |your )?(?:user|boss|manager|lead|tech lead|team lead|cto|ceo|vp"
    r"|director|client|customer|owner|admin|administrator|product owner|pm|stakeholder"
    r"|senior (?:engineer|dev|developer)|architect|security team|legal|higher-ups|management)"
)
_AGENT = (r"(?:they|he|she|the user|the client|the customer|the requester|the author"
          r"|the developer|the team|the reviewer|the stakeholder)")
_OVERRIDE = (r"\b(?:overrid\w*|outweigh\w*|trumps?|supersed\w*|takes? precedence"
             r"|more important than|matters? more than)\b")
# Dropping a check because someone said so: "so we don't need to run the scan".
_DROP_CHECK = (r"\b(?:don't|do not|no longer) (?:need|have) to (?:run|check|wait|test|review"
               r"|ask|verify)\b")
_FINE = (r"\b(?:it's|it is|that's|that is|this is|is) (?:fine|ok|okay|allowed|approved"
         r"|acceptable|safe)\b")

# (signature, trigger words (the cue cannot match without one of them), cue, what the
# cue's sentence must also hold or None)
_CUES: tuple[tuple[str, str, str, str | None], ...] = (
    # --- NARRATIVE_RESCUE
    ("NARRATIVE_RESCUE", "spirit",
     r"\bspirit of the (?:rule|law|policy|guideline|requirement|spec|process|agreement"
     r"|contract|instructions?)s?\b", None),
    ("NARRATIVE_RESCUE", "spirit",
     r"\bspirit (?:rather than|over|and not|not|instead of) the letter\b",
     None),
    ("NARRATIVE_RESCUE", "spirit",
     r"\b(?:in|within|keeping with|true to) the spirit of\b", _CROSSING),
    ("NARRATIVE_RESCUE",
     "really actually totally perfectly probably basically technically honestly surely",
     r"\b(?:it's|it is|this is|that's|that is|it'd be|it would be|should be|would be|is)"
     r" (?:really|actually|totally|perfectly|probably|basically|technically|honestly|surely)"
     r" (?:fine|ok|okay|harmless|acceptable|safe|allowed|no big deal)\b", _CROSSING),
    ("NARRATIVE_RESCUE", "context circumstances situation",
     r"\b(?:given|considering|in light of|because of) (?:the |this |our )?(?:broader |larger "
     r"|wider |full |overall |special |unique |current |unusual )?(?:context|circumstances"
     r"|situation)\b", _CROSSING),
    ("NARRATIVE_RESCUE", "context circumstances situation",
     r"\b(?:context|the situation|the circumstances) (?:matters?|counts?|is|are) more"
     r" (?:important )?than (?:the |a |any )?(?:rule|policy|guideline|process|letter)", None),
    ("NARRATIVE_RESCUE", "meant designed intended written supposed",
     r"\b(?:the|this|that) (?:rule|policy|guideline|requirement|check|gate|constraint)s?"
     r" (?:doesn't|does not|don't|do not|wasn't|was not|isn't|is not|weren't|aren't)"
     r" (?:really )?(?:meant|designed|intended|written|supposed) (?:to|for)\b", _CROSSING),
    ("NARRATIVE_RESCUE", "apply",
     r"\b(?:the|this|that) (?:rule|policy|guideline|requirement|check|gate|constraint)s?"
     r" (?:doesn't|does not|don't|do not) really apply\b", None),
    ("NARRATIVE_RESCUE", "although though despite but",
     r"\b(?:we|i|you) can (?:safely |still |just )?(?:assume|treat|consider|call|mark|count"
     r"|say)\b[^.!?\n]{0,40}\b(?:pass(?:es|ed|ing)?|works?|working|fine|green|done|ok|okay"
     r"|successful|correct)\b",
     r"\b(?:although|even though|despite|though|but)\b[^.!?\n]{0,120}"
     r"\b(?:fail\w*|red|broken|errors?|crash\w*)\b"
     r"|\b(?:fail\w*|red|broken|errors?|crash\w*)\b[^.!?\n]{0,120}"
     r"\b(?:although|even though|despite|though|but)\b"),
    # --- MORAL_OVERRIDE
    ("MORAL_OVERRIDE",
     "ethic ethics ethical ethically moral morally morality unethical immoral thing greater "
     "conscience wrong",
     r"\b(?:ethic(?:s|al|ally)|moral(?:ly|ity)?|unethical|immoral|the right thing(?: to do)?"
     r"|greater good|(?:in good )?conscience|(?:moral|ethical) (?:duty|obligation|imperative)"
     r"|it would be wrong not to)\b",
     r"(?:" + _CROSSING + r"|" + _OVERRIDE + r")[^.!?\n]{0,80}" + _RULE
     + r"|" + _RULE + r"[^.!?\n]{0,80}(?:" + _CROSSING + r"|" + _OVERRIDE
     + r"|\b(?:matters? less|less important)\b)"),
    # --- AUTHORITY_DRIFT
    ("AUTHORITY_DRIFT", "trust word",
     r"\btrust me\b|\btake my word(?: for it)?\b", None),
    ("AUTHORITY_DRIFT", "said says told",
     r"\b(?:because|since|as) " + _AUTHORITY + r" (?:said|says|told (?:me|us)) so\b", None),
    ("AUTHORITY_DRIFT", "said says told asked wants wanted insisted insists approved okayed signed",
     r"\b" + _AUTHORITY + r" (?:said|says|told (?:me|us)|asked|wants|wanted|insisted|insists"
     r"|approved|okayed|signed off)\b[^.!?\n]{0,100}?\b(?:so|therefore|hence|which means)\b,?"
     r" (?:we|i)(?:'ll| will| should| can| must| may| are allowed to| am allowed to"
     r"| don't need to| do not need to| no longer need to)\b",
     _CROSSING + r"|" + _FINE + r"|" + _DROP_CHECK),
    ("AUTHORITY_DRIFT", "said says told",
     r"\b(?:he|she|they|someone|somebody|the user|the client|the lead) (?:said|says|told"
     r" (?:me|us)) (?:it's|it is|that's|it was|this is) (?:fine|ok|okay|allowed|safe)\b",
     _CROSSING),
    ("AUTHORITY_DRIFT", "authority say-so sayso word",
     r"\bon (?:my|his|her|their|the (?:user|ceo|cto|lead|boss|manager|client)'s)"
     r" (?:authority|say-?so|word)\b", None),
    ("AUTHORITY_DRIFT", "i'm am",
     r"\b(?:i am|i'm) (?:the|an?) (?:admin|administrator|owner|expert|authority|senior \w+"
     r"|lead)\b[^.!?\n]{0,60}\b(?:so|trust|believe)\b", _CROSSING + r"|\btrust\b|\bbelieve\b"),
    ("AUTHORITY_DRIFT", "told",
     r"\b(?:i was|we were|i've been|we've been|i got) told (?:to|that|it's|it is)\b", _CROSSING),
    # --- INTENT_INFERENCE
    ("INTENT_INFERENCE", "assume",
     r"\bsafe to assume\b", None),
    ("INTENT_INFERENCE", "between",
     r"\bread(?:ing)? between the lines\b", None),
    ("INTENT_INFERENCE", "probably likely surely must clearly obviously presumably really actually",
     r"\b" + _AGENT + r" (?:probably|likely|surely|must have|must|clearly|obviously|presumably"
     r"|really|actually) (?:means?|meant|wants?|wanted|intends?|intended|expects?|expected"
     r"|would want|would like|had in mind)\b", None),
    ("INTENT_INFERENCE", "really actually probably likely",
     r"\b(?:what|all) " + _AGENT + r" (?:really|actually|probably|likely) (?:means?|meant"
     r"|wants?|wanted|intends?|intended)\b", None),
    ("INTENT_INFERENCE", "clearly obviously evidently presumably",
     r"\b(?:clearly|obviously|evidently|presumably) (?:intended|intends|meant|means to"
     r"|wanted|wants)\b", None),
    ("INTENT_INFERENCE", "assume assuming infer inferring guess guessing interpret interpreting",
     r"\b(?:assume|assuming|infer|inferring|guess|guessing|interpret(?:ing)? (?:this|that|it)"
     r" as meaning)(?: that)? " + _AGENT + r"(?:'s)? (?:meant|means|wants|wanted|intended"
     r"|intends|would want|intent)\b", None),
    ("INTENT_INFERENCE", "want",
     r"\b(?:they|he|she|the user)(?:'d| would) (?:probably |surely |likely )?want"
     r" (?:me|us) to\b", None),
    ("INTENT_INFERENCE", "implied implicit obvious",
     r"\b(?:it's|it is) (?:implied|implicit|obvious) that " + _AGENT + r" (?:want|mean"
     r"|intend)", None),
)

_NEGATION = (
    r"\b(?:not|never|no|don't|do not|doesn't|does not|didn't|isn't|wasn't|aren't|shouldn't"
    r"|should not|mustn't|must not|can't|cannot|won't|avoid|instead of|rather than|refuse"
    r"|refused|without|neither|nor|no need to)\b")
_CLAUSE_BREAK = r"[,;:()]|\b(?:but|so|then|because|although|though)\b"
_SENTENCE_END = re.compile(r"[.!?\n]")
_words_of = word_splitter("'")

# Screening: a cue is only tried on a turn holding one of its trigger words (one
# tokenisation per turn instead of a regex scan per cue; a test checks that the
# screen never hides a flag over the cases file and random text). Each expression
# (cues, their contexts, the negation) is compiled the first time a turn needs it:
# compiling them all at import was most of this module's share of a server's first
# ingest, for cues that most turns never try.
_SCREENED = tuple((sig, frozenset(words.split()), cue, need) for sig, words, cue, need in _CUES)


@cache
def _compiled(source: str) -> re.Pattern[str]:
    return re.compile(source, _F)

MAX_CANDIDATES = 256  # cue matches checked per turn: bounds the sentence-window work


@dataclass(frozen=True)
class Flag:
    signature: str
    span: str  # the matched text, whitespace-collapsed, at most MAX_SPAN_CHARS
    start: int  # offsets in the scanned text
    end: int


def _sentence(probe: str, start: int, end: int) -> tuple[int, int]:
    """Bounds of the sentence around probe[start:end] (within SENTENCE_WINDOW)."""
    lo = max(0, start - SENTENCE_WINDOW)
    head = probe[lo:start]
    cut = max(head.rfind("."), head.rfind("!"), head.rfind("?"), head.rfind("\n"))
    s_start = lo + cut + 1 if cut >= 0 else lo
    tail = _SENTENCE_END.search(probe, end, min(len(probe), end + SENTENCE_WINDOW))
    s_end = tail.end() if tail is not None else min(len(probe), end + SENTENCE_WINDOW)
    return s_start, s_end


def _negated(probe: str, s_start: int, start: int) -> bool:
    window = probe[max(s_start, start - NEGATION_WINDOW) : start]
    last = 0
    for brk in _compiled(_CLAUSE_BREAK).finditer(window):
        last = brk.end()
    return _compiled(_NEGATION).search(window[last:]) is not None


def _live_need(need: re.Pattern[str], probe: str, s_start: int, s_end: int) -> bool:
    """The sentence holds the required context, not negated ("we must not skip ...")."""
    for m in need.finditer(probe, s_start, s_end):
        if not _negated(probe, s_start, m.start()):
            return True
    return False


def nafe_flags_in(text: str, *, screen: bool = True) -> list[Flag]:
    """Flags in ``text``, ordered by signature (SIGNATURES order), then position.

    ``screen=False`` tries every cue (the tests compare it with the screened scan).
    """
    probe = text.replace("’", "'")  # same length: offsets stay valid
    words = set(_words_of(probe.lower())) if screen else set()
    found: dict[tuple[str, int], Flag] = {}
    budget = MAX_CANDIDATES
    for signature, triggers, cue_source, need_source in _SCREENED:
        if screen and triggers.isdisjoint(words):
            continue
        need = _compiled(need_source) if need_source else None
        for m in _compiled(cue_source).finditer(probe):
            if (signature, m.start()) in found:
                continue
            budget -= 1
            if budget < 0:
                break
            s_start, s_end = _sentence(probe, m.start(), m.end())
            if probe[s_start:s_end].rstrip(" \"')]*_`»”\n").endswith("?"):
                continue  # asked, not asserted
            if _negated(probe, s_start, m.start()):
                continue
            if need is not None and not _live_need(need, probe, s_start, s_end):
                continue
            span = " ".join(text[m.start() : m.end()].split())[:MAX_SPAN_CHARS]
            found[(signature, m.start())] = Flag(signature, span, m.start(), m.end())
            if len(found) >= MAX_FLAGS:
                break
        if len(found) >= MAX_FLAGS or budget < 0:
            break
    order = {sig: i for i, sig in enumerate(SIGNATURES)}
    flags: list[Flag] = []
    for flag in sorted(found.values(), key=lambda f: (order[f.signature], f.start, -f.end)):
        last = flags[-1] if flags else None
        if last is not None and last.signature == flag.signature and flag.start < last.end:
            continue  # two cues of one signature on the same words: one flag
        flags.append(flag)
    return flags
