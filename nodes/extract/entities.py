"""Entities named in a turn, found without a model (GraphRAG).

One pass over the whitespace-separated tokens of the text (plus two screened regexes
for backticks and package installs/imports) finds, per token (what a token is apart
from its place — punctuation, core, kind, word class — is worked out once per distinct
token and cached: tokens repeat within and across turns):

* ``url``      ``https://host/path``
* ``file``     paths with a slash, or names with a known source/document extension
* ``issue``    ``#123``, ``issue 123``, ``PR 7``, ``ABC-42``
* ``package``  what follows ``pip install``/``npm install``/... and ``import``/``from``
* ``code``     backticked text, ``call()``, ``snake_case``, ``camelCase``, ``PascalCase``,
  ``dotted.module``
* ``speaker``  the ``Name:`` that opens a turn
* ``name``     runs of capitalised words ("Claude Desktop", "Caroline"); a sentence's
  capitalised first word alone is read as the start of a phrase
* ``phrase``   a pure-Python noun-phrase heuristic: runs of up to three content words
  with nothing but a space between them ("pottery class", "deploy pipeline")

Aliases merge through the key (``entity_key``): case folded, ``-``/``_``/space runs made
one space ("sqlite-vec" = "sqlite_vec" = "SQLite vec"), the last word's plural of a
common-noun phrase dropped ("pottery classes" = "pottery class"). URLs and paths keep
their own text, lower-cased. The cost is linear in the text (a huge turn is scanned up
to ``MAX_SCAN_CHARS``); a turn yields at most ``MAX_MENTIONS`` distinct entities.
"""

from __future__ import annotations

import functools
import operator
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
Found = tuple[str, str, str, int, int]  # key, surface, kind, start, end

_EXT = (r"py|pyi|md|rst|txt|js|mjs|ts|tsx|jsx|json|jsonl|yaml|yml|toml|ini|cfg|sql|rs|go"
        r"|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|html|css|scss|lock|csv|xml|proto"
        r"|dockerfile")
_EXTS = frozenset(_EXT.split("|"))
_TICKET = re.compile(r"[A-Z][A-Z0-9]{1,9}-\d{1,6}")
_PACKAGE = re.compile(
    r"\b(?:pip3? install|uv (?:add|pip install)|poetry add|npm (?:install|i)|yarn add"
    r"|pnpm add|cargo add|go get|gem install|brew install|apt(?:-get)? install)"
    r"((?: {1,4}[\w@./=<>~^-]{1,80}){1,6})"
    r"|^[ \t]{0,8}(?:from|import)[ \t]{1,4}([A-Za-z_][\w.]{0,80})", re.M)
_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
_SNAKE = re.compile(r"[a-z][a-z0-9]{0,30}(?:_[a-z0-9]{1,30}){1,6}")
_HUMPED = re.compile(r"[a-z]{1,30}(?:[A-Z][a-z0-9]{1,30}){1,6}"
                     r"|[A-Z][a-z0-9]{1,30}(?:[A-Z][a-z0-9]{0,30}){1,6}")
_DOTTED = re.compile(r"[a-z_][a-z0-9_]{1,40}(?:\.[a-z_][a-z0-9_]{1,40}){1,5}")
_IDENT = re.compile(r"[A-Za-z_][\w.]{0,60}")
_SPEAKER = re.compile(r"\A[ \t]{0,8}([A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30}){0,2}):[ \t]")
_TOKEN = re.compile(r"\S+")
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]{0,40}")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]{0,40}")
_SEPARATORS = re.compile(r"[\s_\-.·/]+")
_LEAD = "([{<\"'“‘`*"
_TAIL = ".,;:!?'\"’”)]}>*`"
_TRIM = ".,;:!?'\"’)]}>*"
_TERMINAL = frozenset(".!?:;")
_START = operator.itemgetter(3)  # of a Found
_ISSUE_WORDS = frozenset("issue ticket bug pr mr gh".split())

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


@functools.lru_cache(maxsize=65_536)  # surface forms repeat across a record
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
    if surface.endswith("()"):
        surface = surface[:-2]
    # Only common-noun phrases lose a plural: "Postgres" and "sqlite_utils" keep theirs.
    return _norm_words(surface, singular=kind == "phrase")


def _special(core: str) -> str | None:
    """The kind of a token that is more than a word (a URL, path, file, ticket, code)."""
    if "://" in core:
        return "url" if core[:4].lower() == "http" else None
    if "/" in core:
        return "file" if "//" not in core and any(c.isalpha() for c in core) else None
    if "." in core:
        base, _, ext = core.rpartition(".")
        if base and ext.lower() in _EXTS and base[-1] != "." and base[0] not in "-.":
            return "file"
        if _DOTTED.fullmatch(core):
            return "code"
    if core[0] == "#":
        return "issue" if core[1:].isdigit() and len(core) <= 8 else None
    if "-" in core and core[0].isupper() and _TICKET.fullmatch(core):
        return "issue"
    if core.endswith("()"):
        return "code" if _IDENT.fullmatch(core[:-2]) else None
    if "_" in core and _SNAKE.fullmatch(core):
        return "code"
    if not core.islower() and not core.isupper() and _HUMPED.fullmatch(core):
        return "code"
    return None


def _claimed_spans(text: str) -> Iterator[tuple[str, str, int, int]]:
    """Backticked names and installed or imported packages (screened: rare)."""
    if "`" in text:
        for m in _BACKTICK.finditer(text):
            surface = m.group(1).strip()
            if surface and len(surface.split()) <= 4:
                kind = "file" if "/" in surface and " " not in surface else "code"
                start = m.start(1) + len(m.group(1)) - len(m.group(1).lstrip())
                yield surface, kind, start, start + len(surface)
    if "install" in text or "import" in text:
        for m in _PACKAGE.finditer(text):
            if m.group(1):
                offset = m.start(1)
                for word in re.finditer(r"[^\s]+", m.group(1)):
                    raw = word.group()
                    name = re.split(r"[=<>~^@]", raw.lstrip("@"), maxsplit=1)[0]
                    if name and not raw.startswith("-"):
                        start = offset + word.start() + len(raw) - len(raw.lstrip("@"))
                        yield name, "package", start, start + len(name)
            else:
                root = m.group(2).split(".")[0]
                yield root, "package", m.start(2), m.start(2) + len(root)


class _Scanner:
    """One pass over the whitespace-separated tokens of a text."""

    def __init__(self, text: str, mask: bytearray | None) -> None:
        self.text = text
        self.mask = mask
        self.found: list[Found] = []
        self.words: list[tuple[str, int, int]] = []  # phrase run: lower, start, end
        self.names: list[tuple[str, int, int]] = []  # capitalised run
        self.names_at_sentence_start = False

    def flush_phrase(self) -> None:
        run = self.words
        if len(run) == 1:  # the common case, as the general one below reads it
            word, start, end = run[0]
            if len(word) >= 4 and not word.endswith(("ly", "ed")):
                surface = self.text[start:end]
                self.found.append((entity_key(surface, "phrase"), surface, "phrase", start,
                                   end))
            run.clear()
            return
        while run and (run[0][0].endswith(("ly", "ed")) or len(run[0][0]) < 3):
            run.pop(0)
        while run and (run[-1][0].endswith(("ly", "ed")) or len(run[-1][0]) < 3):
            run.pop()
        if run:
            tail = run[-3:]
            if len(tail) > 1 or len(tail[0][0]) >= 4:
                surface = self.text[tail[0][1]:tail[-1][2]]
                self.found.append((entity_key(surface, "phrase"), surface, "phrase",
                                   tail[0][1], tail[-1][2]))
        run.clear()

    def flush_names(self, next_is_word: bool) -> None:
        """End a capitalised run. A sentence's capitalised first word alone goes to the
        phrase run ("Pottery classes are fun"); two or more make a name ("Sunset Park
        is nice")."""
        run = self.names
        while run and run[-1][0].casefold() in _CONNECTORS:
            run.pop()
        if run and self.names_at_sentence_start:
            first = run[0][0].casefold().strip("'’")
            if first in _NON_NOUN:
                run.pop(0)
            elif len(run) == 1:
                self.flush_phrase()
                self.words.append((first, run[0][1], run[0][2]))
                if not next_is_word:
                    self.flush_phrase()
                run.clear()
                return
        while run and run[0][0].casefold() in _CONNECTORS:
            run.pop(0)
        if run and not (len(run) == 1 and (len(run[0][0]) < 2
                                          or run[0][0].casefold().strip("'’") in _NON_NOUN)):
            surface = self.text[run[0][1]:run[-1][2]].rstrip("'’")
            self.found.append((entity_key(surface, "name"), surface, "name", run[0][1],
                               run[0][1] + len(surface)))
        run.clear()

    def flush(self) -> None:
        if self.names:
            self.flush_names(False)
        if self.words:
            self.flush_phrase()

    def scan(self, start_at: int) -> list[Found]:
        text, mask, found = self.text, self.mask, self.found
        words, names = self.words, self.names
        sentence_start, prev_end, prev_start, prev_lower = True, -2, 0, ""
        for m in _TOKEN.finditer(text, start_at):
            token = m.group()
            start, end = m.span()
            parsed = _PARSED.get(token)
            if parsed is None:
                parsed = _parse(token)
            lead, core, tail, kind, plain, lower, terminal, core_end = parsed
            cstart, cend = start + lead, start + core_end
            joined = start == prev_end + 1 and not lead and text[prev_end] == " "
            prev_end = end
            if not core or (mask is not None and mask.find(1, cstart, cend) != -1):
                if names or words:
                    self.flush()
                prev_lower = ""
                if tail:
                    sentence_start = terminal
                continue
            if joined and prev_lower in _ISSUE_WORDS and (
                    (kind == "issue" and core[0] == "#") or (kind is None and core.isdigit())):
                # "issue 42", "PR #7": the word belongs to the id
                for run in (words, names):
                    if run and run[-1][0].lower() == prev_lower:
                        run.pop()
                kind, cstart, core = "issue", prev_start, text[prev_start:cend]
                lower = core.lower()
            prev_start, prev_lower = cstart, lower
            if kind is not None:
                if names or words:
                    self.flush()
                found.append((entity_key(core, kind), core, kind, cstart, cend))
            elif plain:
                if not joined and (names or words):
                    self.flush()
                if plain == _CAPITAL:
                    if words and not names:
                        self.flush_phrase()
                    if not names:
                        self.names_at_sentence_start = sentence_start
                    names.append((core, cstart, cend))
                elif names and lower in _CONNECTORS and not tail:
                    names.append((core, cstart, cend))
                else:
                    if names:
                        self.flush_names(True)
                    if plain == _NOT_NOUN:
                        if words:
                            self.flush_phrase()
                    else:
                        words.append((lower, cstart, cend))
            elif names or words:
                self.flush()
            if tail and (names or words):
                self.flush()
            sentence_start = terminal
        self.flush()
        return found


# A token's reading apart from its place in the text (see ``_parse``), by token: tokens
# repeat within and across turns. Bounded: emptied when it holds ``_PARSED_MAX``.
_Parsed = tuple[int, str, str, str | None, int, str, bool, int]
_PARSED: dict[str, _Parsed] = {}
_PARSED_MAX = 50_000  # ~20 MB at most
_CAPITAL, _NOT_NOUN, _NOUN = 1, 2, 3  # plain words: capitalised, never a noun, else


def _parse(token: str) -> _Parsed:
    """(characters of leading punctuation, core, trailing punctuation, special kind,
    plain-word class or 0, core lower-cased, whether the tail ends a sentence, offset
    of the core's end in the token)."""
    core = token.lstrip(_LEAD)
    lead = len(token) - len(core)
    stripped = core.rstrip(_TAIL)
    tail = core[len(stripped):]
    if stripped.endswith("(") and tail.startswith(")"):  # call()
        stripped, tail = stripped + ")", tail[1:]
    core = stripped
    kind: str | None = None
    plain = 0
    lower = core.lower()
    if core:
        if core.isalpha():
            # camelCase is code; "PostgreSQL" and "GitHub" stay names
            kind = "code" if core[0].islower() and not core.islower() else None
        else:
            kind = _special(core)
        if kind is None and _PLAIN_WORD.fullmatch(core):
            if core[0].isupper():
                plain = _CAPITAL
            elif lower in _NON_NOUN or "'" in core or "’" in core:
                plain = _NOT_NOUN
            else:
                plain = _NOUN
    parsed = (lead, core, tail, kind, plain, lower, any(c in _TERMINAL for c in tail),
              lead + len(core))
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[token] = parsed
    return parsed


def mentions_and_occurrences(text: str) -> tuple[list[Mention], list[tuple[str, int, int]]]:
    """The distinct entities of ``text`` (first mention of each, in text order; at most
    ``MAX_MENTIONS``) and every occurrence of them as ``(key, start, end)``."""
    text = text[:MAX_SCAN_CHARS]
    found: list[Found] = []
    mask: bytearray | None = None
    start_at = 0
    speaker = _SPEAKER.match(text)
    if speaker:
        found.append((entity_key(speaker.group(1), "speaker"), speaker.group(1), "speaker",
                      speaker.start(1), speaker.end(1)))
        start_at = speaker.end(1) + 1
    for surface, kind, start, end in _claimed_spans(text):
        if mask is None:
            mask = bytearray(len(text) + 1)
        if end > start and mask.find(1, start, end) == -1:
            mask[start:end] = b"\x01" * (end - start)
            found.append((entity_key(surface, kind), surface, kind, start, end))
    found += _Scanner(text, mask).scan(start_at)
    found.sort(key=_START)
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
