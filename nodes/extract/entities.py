"""Entities named in a turn, found without a model (GraphRAG, issue #6).

Kinds, in the order they claim text (a later kind never overlaps an earlier one):

* ``url``      ``https://host/path``
* ``file``     paths with a slash, or names with a known source/document extension
* ``issue``    ``#123``, ``issue 123``, ``PR #7``, ``ABC-42``
* ``package``  what follows ``pip install``/``npm install``/... and ``import``/``from``
* ``code``     backticked text, ``call()``, ``snake_case``, ``camelCase``, ``PascalCase``
* ``speaker``  the ``Name:`` that opens a turn
* ``name``     runs of capitalised words ("Claude Desktop", "Caroline")
* ``phrase``   a pure-Python noun-phrase heuristic: runs of up to three content words
  between stop words and punctuation ("pottery class", "deploy pipeline")

Aliases merge through the key (``entity_key``): case folded, ``-``/``_``/space runs made
one space ("sqlite-vec" = "sqlite_vec" = "SQLite vec"), the last word's plural dropped
of a common-noun phrase dropped ("pottery classes" = "pottery class"). URLs and paths keep their
own text, lower-cased. Every regex is a bounded or possessive-free single pass, so the
cost is linear in the text; a turn yields at most ``MAX_MENTIONS`` distinct entities.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from nodes.extract.terms import STOP_WORDS

__all__ = ["KINDS", "MAX_MENTIONS", "Mention", "entity_key", "mentions",
           "mentions_and_occurrences", "query_keys"]

MAX_MENTIONS = 200  # distinct entities kept per turn (a giant turn stays bounded)
MAX_SCAN_CHARS = 200_000  # of a huge turn, the start is scanned (linear, bounded)
KINDS = ("url", "file", "issue", "package", "code", "speaker", "name", "phrase")

# (key, surface, kind, start offset)
Mention = tuple[str, str, str, int]

_EXT = (r"py|pyi|md|rst|txt|js|mjs|ts|tsx|jsx|json|jsonl|ya?ml|toml|ini|cfg|sql|rs|go|java"
        r"|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|html|css|scss|lock|csv|xml|proto|dockerfile")
# Each pattern runs only when a cheap screen (a character it needs) passes.
_URL = re.compile(r"\bhttps?://[^\s<>\"'`()\[\]{}]{1,300}", re.I)
_PATH = re.compile(r"(?:\.{0,2}/)?(?:[\w.-]{1,60}/){1,12}[\w.-]{1,80}(?![\w/])")
_FILE_EXT = re.compile(r"[\w-]{1,80}\.(?:" + _EXT + r")\b", re.I)
_HASH_ISSUE = re.compile(r"(?:\b(?:issue|ticket|bug|pr|pull request|mr|gh)[ -]?)?#(\d{1,7})\b",
                         re.I)
_WORD_ISSUE = re.compile(r"\b(?:issue|ticket|bug|pr|mr|gh)[ -](\d{1,7})\b", re.I)
_TICKET = re.compile(r"\b([A-Z][A-Z0-9]{1,9}-\d{1,6})\b")
_PACKAGE = re.compile(
    r"\b(?:pip3? install|uv (?:add|pip install)|poetry add|npm (?:install|i)|yarn add"
    r"|pnpm add|cargo add|go get|gem install|brew install|apt(?:-get)? install)"
    r"((?: {1,4}[\w@./=<>~^-]{1,80}){1,6})"
    r"|^[ \t]{0,8}(?:from|import)[ \t]{1,4}([A-Za-z_][\w.]{0,80})", re.M)
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_CALL = re.compile(r"\b([A-Za-z_][\w.]{0,60})\(\)")
_SNAKE = re.compile(r"\b[a-z][a-z0-9]{0,30}(?:_[a-z0-9]{1,30}){1,6}\b")
_HUMPED = re.compile(r"\b[a-z]{1,30}(?:[A-Z][a-z0-9]{1,30}){1,6}\b"
                     r"|\b[A-Z][a-z0-9]{1,30}(?:[A-Z][a-z0-9]{0,30}){1,6}\b")
_SPEAKER = re.compile(r"\A[ \t]{0,8}([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30}){0,2}):[ \t]")
_CAPITALISED = re.compile(
    r"\b[A-Z][\w'’-]{0,40}(?:(?: (?:of|the|de|da|van|von|and|for|on))? [A-Z][\w'’-]{0,40}){0,5}")
# A word and what follows it up to the next word.
_WORD_GAP = re.compile(r"([A-Za-z][A-Za-z'’-]{0,40})([^A-Za-z]*)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]{0,40}")
_SENTENCE_MARKS = frozenset(".!?:;\n\"“(")
_SEPARATORS = re.compile(r"[\s_\-.·/]+")
_TRIM = ".,;:!?'\"’)]}>*"

# Words that never start or make a noun phrase on their own: function words, pronouns,
# conversational fillers, common verbs and adjectives.
_NON_NOUN = STOP_WORDS | frozenset(
    """
    yes yeah yep ok okay oh wow hey hi hello thanks thank please sorry sure well really
    great good nice awesome amazing cool glad happy sad fun lot lots thing things stuff way
    ways something anything everything nothing someone anyone everyone one ones two three
    first last next new old big small little much many every another other others still
    even though although however maybe perhaps probably definitely actually totally always
    never sometimes often usually today tomorrow yesterday tonight time times day days week
    weeks month months year years ago soon later right left bit kind sort lot us i'm i've
    i'd you're you've it's that's there's what's let's can't don't didn't doesn't isn't
    wasn't won't haven't hasn't couldn't wouldn't shouldn't i'll we'll we're they're
    make makes made making take takes took taken taking give gives gave given giving know
    knows knew known think thinks thought want wants wanted need needs needed see sees saw
    seen look looks looked looking feel feels felt feeling say says said tell told try
    tries tried trying keep keeps kept come comes came coming use used uses using work
    works worked seem seems seemed love loved loves hope hoped hopes mean means meant
    find found put let help helped helps start started show showed shown call called
    sounds sound sounded must might may shall able done doing getting having being
    went go goes gone import imports replace install installed
    block blocks blocking fix fixes fixing instead rather almost slow fast quick
    compare compared update updated updates fail fails failing passes passing run ran
    runs add added adds set sets ask asked
    asks read reads wrote write writes check checked checks move moved moves
    thing awesome super pretty quite lovely wonderful beautiful exciting excited
    interesting important hard easy best better worse worst sure true false enough
    via per etc vs also just like
    """.split())
_CONNECTORS = frozenset("of the de da van von and for on".split())


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "ches", "shes", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _norm_words(text: str, singular: bool = True) -> str:
    """Case-folded words joined by one space, last plural dropped. Camel humps are not
    split: "PostgreSQL" must meet "postgresql", which matters more than "RunContext"
    meeting "run_context"."""
    words = _SEPARATORS.sub(" ", text).strip(" " + _TRIM).casefold().split()
    if not words:
        return ""
    if singular:
        words[-1] = _singular(words[-1])
    return " ".join(words)


def entity_key(surface: str, kind: str) -> str:
    """The merge key of a surface form: aliases of one entity share it."""
    if kind in ("url", "file"):
        key = surface.strip(_TRIM).casefold()
        key = key[2:] if key.startswith("./") else key
        return key.rstrip("/")
    if kind == "issue":
        if _TICKET.fullmatch(surface):
            return surface.upper()
        digits = re.search(r"\d+\Z", surface)
        return "#" + (digits.group() if digits else surface)
    # Only common-noun phrases lose a plural: "Postgres" and "sqlite_utils" keep theirs.
    return _norm_words(surface, singular=kind == "phrase")


def _taken(mask: bytearray, start: int, end: int) -> bool:
    return mask.find(1, start, end) != -1


def _claim(mask: bytearray, start: int, end: int) -> None:
    mask[start:end] = b"\x01" * (end - start)


def _files(text: str) -> Iterator[tuple[str, str, int, int]]:
    if "/" in text:
        for m in _PATH.finditer(text):
            start = m.start()
            if start and (text[start - 1].isalnum() or text[start - 1] in "/.:-_"):
                continue
            surface = m.group().rstrip(_TRIM)
            if "//" not in surface and any(c.isalpha() for c in surface):
                yield surface, "file", start, start + len(surface)
    if "." in text:
        for m in _FILE_EXT.finditer(text):
            start = m.start()
            if start and (text[start - 1].isalnum() or text[start - 1] in "/._-"):
                continue
            yield m.group(), "file", start, m.end()


def _issues(text: str) -> Iterator[tuple[str, str, int, int]]:
    if "#" in text:
        for m in _HASH_ISSUE.finditer(text):
            if m.start() and not m.group()[0].isalpha() and text[m.start() - 1] in "&#\\":
                continue
            yield m.group(), "issue", m.start(), m.end()
    if not any(c.isdigit() for c in text):
        return
    for m in _WORD_ISSUE.finditer(text):
        yield m.group(), "issue", m.start(), m.end()
    if "-" in text:
        for m in _TICKET.finditer(text):
            yield m.group(1), "issue", m.start(), m.end()


def _code(text: str) -> Iterator[tuple[str, str, int, int]]:
    if "`" in text:
        for m in _BACKTICK.finditer(text):
            surface = m.group(1).strip()
            if " " in surface:
                if len(surface.split()) > 4:
                    continue  # a backticked command line, not a name
                yield surface, "code", m.start(1), m.end(1)
            elif surface:
                yield surface, "file" if "/" in surface else "code", m.start(1), m.end(1)
    if "()" in text:
        for m in _CALL.finditer(text):
            yield m.group(1), "code", m.start(1), m.end(1)
    if "_" in text:
        for m in _SNAKE.finditer(text):
            yield m.group(), "code", m.start(), m.end()
    for m in _HUMPED.finditer(text):
        yield m.group(), "code", m.start(), m.end()


def _spans(text: str) -> Iterator[tuple[str, str, int, int]]:
    """(surface, kind, start, end) candidates in claiming order."""
    if "://" in text:
        for m in _URL.finditer(text):
            surface = m.group().rstrip(_TRIM)
            yield surface, "url", m.start(), m.start() + len(surface)
    yield from _files(text)
    yield from _issues(text)
    if "install" in text or "import" in text:
        for m in _PACKAGE.finditer(text):
            if m.group(1):
                offset = m.start(1)
                for word in re.finditer(r"[^\s]+", m.group(1)):
                    name = re.split(r"[=<>~^@]", word.group().lstrip("@"), maxsplit=1)[0]
                    if name and not word.group().startswith("-"):
                        yield name, "package", offset + word.start(), offset + word.end()
            else:
                root = m.group(2).split(".")[0]
                yield root, "package", m.start(2), m.start(2) + len(root)
    yield from _code(text)


def _sentence_start(text: str, pos: int) -> bool:
    i = pos - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_MARKS


def _names(text: str, mask: bytearray, first_words: list[int]
           ) -> Iterator[tuple[str, int, int]]:
    """Runs of capitalised words. A sentence's capitalised first word on its own is
    left to the phrase heuristic (its offset goes to ``first_words``): "Pottery classes
    are fun" is a phrase, "Sunset Park is nice" a name."""
    for m in _CAPITALISED.finditer(text):
        start, words = m.start(), m.group().split(" ")
        if _sentence_start(text, start):
            if words[0].casefold().strip("'’") in _NON_NOUN:
                start += len(words[0]) + 1
                words = words[1:]
            elif len(words) == 1:
                first_words.append(start)
                continue
        while words and words[-1].casefold() in _CONNECTORS:
            words.pop()
        while words and words[0].casefold() in _CONNECTORS:
            start += len(words[0]) + 1
            words = words[1:]
        if not words or (len(words) == 1 and (
                len(words[0]) < 2 or words[0].casefold().strip("'’") in _NON_NOUN)):
            continue
        surface = " ".join(words).rstrip("'’")
        end = start + len(surface)
        if not _taken(mask, start, end):
            yield surface, start, end


def _phrases(text: str, mask: bytearray, first_words: list[int]
             ) -> Iterator[tuple[str, int, int]]:
    """Runs of content words with single spaces between them: no stop word, filler,
    punctuation or already claimed text inside. The last three words of a run are
    kept (the head noun comes last); a lone word needs four letters."""
    run: list[tuple[str, int, int]] = []
    allowed_capitals = set(first_words)

    def flush() -> Iterator[tuple[str, int, int]]:
        while run and (run[0][0].endswith(("ly", "ed")) or len(run[0][0]) < 3):
            run.pop(0)
        while run and (run[-1][0].endswith(("ly", "ed")) or len(run[-1][0]) < 3):
            run.pop()
        if run:
            tail = run[-3:]
            if len(tail) > 1 or len(tail[0][0]) >= 4:
                yield text[tail[0][1]:tail[-1][2]], tail[0][1], tail[-1][2]
        run.clear()

    claimed = mask.find(1) != -1
    for m in _WORD_GAP.finditer(text):
        word = m.group(1)
        start, end = m.start(1), m.end(1)
        lower = word.lower()
        if (lower in _NON_NOUN or "'" in word or "’" in word
                or not (word.islower() or start in allowed_capitals)
                or (claimed and _taken(mask, start, end))):
            if run:
                yield from flush()
            continue
        run.append((lower, start, end))
        if m.group(2) != " " and run:
            yield from flush()
    if run:
        yield from flush()


def mentions_and_occurrences(text: str) -> tuple[list[Mention], list[tuple[str, int, int]]]:
    """The distinct entities of ``text`` (first mention of each, in text order; at most
    ``MAX_MENTIONS``) and every occurrence of them as ``(key, start, end)``.

    A huge turn is scanned up to ``MAX_SCAN_CHARS``.
    """
    text = text[:MAX_SCAN_CHARS]
    mask = bytearray(len(text) + 1)
    found: list[tuple[str, str, str, int, int]] = []
    speaker = _SPEAKER.match(text)
    if speaker:
        _claim(mask, speaker.start(1), speaker.end(1))
        found.append((entity_key(speaker.group(1), "speaker"), speaker.group(1), "speaker",
                      speaker.start(1), speaker.end(1)))
    for surface, kind, start, end in _spans(text):
        if end > start and not _taken(mask, start, end):
            _claim(mask, start, end)
            found.append((entity_key(surface, kind), surface, kind, start, end))
    first_words: list[int] = []
    for surface, start, end in _names(text, mask, first_words):
        _claim(mask, start, end)
        found.append((entity_key(surface, "name"), surface, "name", start, end))
    for surface, start, end in _phrases(text, mask, first_words):
        found.append((entity_key(surface, "phrase"), surface, "phrase", start, end))
    found.sort(key=lambda m: m[3])
    seen: set[str] = set()
    out: list[Mention] = []
    occurrences: list[tuple[str, int, int]] = []
    for key, surface, kind, start, end in found:
        if key in seen:
            occurrences.append((key, start, end))
        elif len(key) >= 2 and key not in _NON_NOUN and len(out) < MAX_MENTIONS:
            seen.add(key)
            out.append((key, surface, kind, start))
            occurrences.append((key, start, end))
    return out, occurrences


def mentions(text: str) -> list[Mention]:
    """The distinct entities of ``text`` (see ``mentions_and_occurrences``)."""
    return mentions_and_occurrences(text)[0]


def query_keys(text: str) -> list[str]:
    """Keys a question may name: its entities, and every 1-3 word run of content words
    (a question's words need not look like an entity to name one)."""
    keys = [m[0] for m in mentions(text)]
    words = [w.casefold().strip("'’") for w in _WORD.findall(text[:2_000])]
    content = [w for w in words if w not in _NON_NOUN and len(w) >= 3]
    for n in (1, 2, 3):
        for i in range(len(content) - n + 1):
            words_n = " ".join(content[i:i + n])
            keys += [_norm_words(words_n), _norm_words(words_n, singular=False)]
    return list(dict.fromkeys(k for k in keys if k))
