"""Values assigned to names that say they hold a secret (nodes.extract.secrets uses it).

An assignment in any of the usual syntaxes: ``NAME=value``, ``name: value``, ``:=``,
``::=``, ``?=``, ``.=``, ``=>``, a comparison, a typed declaration
(``var apiToken string = "..."``), two quoted arguments (``setProperty("API_TOKEN",
"...")``), a ``--password value`` option, ``<password>value</password>``,
``<add key="Password" value="..."/>``, and ``the password is <random>``.
nodes.extract.secret_values judges the name (whether any literal is a secret, or only a
random one, or none) and the value (placeholders, references, numbers, paths). Quoted
values may hold spaces; an unquoted value after ``password:`` that runs to the end of a
configuration line as a few plain words is a passphrase.

Why matching stays linear: secret words are found by substring search; the name around
each is scanned back once (each character at most once); the regexes are anchored there
with bounded, possessive quantifiers; a secret word inside a value already read is
skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from nodes.extract.secret_values import (
    ANY_LITERAL,
    NOT_SECRET,
    literal_secret,
    looks_random,
    name_tier,
)

__all__ = ["MAX_VALUE", "assignments"]

# A name, an optional closing quote or bracket, an optional type, then the sign (``=``,
# ``:``, ``:=``, ``::=``, ``?=``, ``.=``, ``=>``, a comparison, or a comma between two
# quoted arguments: setProperty("API_TOKEN", "...")); or, after a name that ends in a
# secret noun, white space or ``is``/``was`` before a value that could be random (a
# quote, or a digit or symbol in the next word), or any value after a ``--`` option.
# The value is read from where the match ends (_value); the name is judged by
# nodes.extract.secret_values.name_tier.
_NAME_OP = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<dash>--?)?(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,80}+)"
    r"(?P<noun>(?i:(?<=password)|(?<=passwd)|(?<=phrase)|(?<=pwd)|(?<=secret)|(?<=token)"
    r"|(?<=creds)|(?<=credential)|(?<=credentials)))?"
    r"(?P<closed>\\?[\"'`]\]?)?"
    # a typed declaration: var apiToken string = ..., secret: String = ...
    r"(?:(?:[ \t]{1,3}+|[ \t]{0,3}+:[ \t]{0,3}+)[A-Za-z_][A-Za-z0-9_.]{0,30}+(?:\[\])?"
    r"(?=[ \t]{0,3}+:?=(?!=)))?[ \t]{0,3}+"
    r"(?P<op>:{1,3}=|=>|===?|!==?|[?.]=|=|:(?![:/])|(?(closed),(?=[ \t]{0,3}+[\"'`])|(?!))"
    r"|(?(noun)(?<=[ \t])(?:(?:is|was)[ \t]{1,3}+)?"
    r"(?(dash)|(?=[\"'`]|[^\s\"'`]{0,64}?[0-9!@#$%^&*+=~?|:/]))|(?!)))[ \t]{0,3}+")
_XML_ELEMENT = re.compile(
    r"<(?P<name>[A-Za-z_][A-Za-z0-9_.:-]{0,63}+)>[ \t\r\n]{0,40}+(?P<secret>[^\s<>]{1,4096}+)"
    r"[ \t\r\n]{0,40}+</")
_KEY_VALUE_ATTRIBUTES = re.compile(
    r"(?i)key[ \t]{0,3}+=[ \t]{0,3}+\"(?P<name>[^\"<>]{1,64}+)\"[ \t]{1,3}+value[ \t]{0,3}+="
    r"[ \t]{0,3}+\"(?P<secret>[^\"<>]{1,256}+)\"")
# Prefixes of a command-line switch that turns something off (GNU ``--no-NAME``).
_NEGATED = ("no-", "no_", "without-", "disable-")
MAX_VALUE = 4096  # a value as long as a base64 DER key is still read whole
# A bare value ends at white space, a quote, a delimiter or a backslash (an escaped
# line break inside a JSON string: "TOKEN=abc\\nNEXT=1").
_BARE = re.compile(r"[^\s'\"`,;<>(){}\[\]\\]{1,%d}+" % MAX_VALUE)  # noqa: UP031
_QUERY_NEXT = re.compile(r"&[A-Za-z_][A-Za-z0-9_.-]{0,40}+=")
# The rest of a line as a passphrase: two to eight plain words and nothing else.
_PHRASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]{0,30}+(?:[ ][A-Za-z0-9][A-Za-z0-9'-]{0,30}+)"
                     r"{1,7}+[ \t]{0,8}+(?=\r?\n|\Z)")
# What may follow a bare value that is the whole field: the end of the line, a comment,
# a delimiter (JSON, a call's arguments, a query string), a closing quote or tag.
_FIELD_END = re.compile(r"[ \t]{0,8}+(?:\r?\n|\Z|//|[#,;:)}\]&'\"`<|])")
# What may begin a configuration line before its name: indentation, a list dash,
# ``export`` or ``set``, a quote.
_LINE_LEAD = re.compile(r"[ \t]{0,40}+(?:(?:export|set|-)[ \t]{1,3}+)?[\"']?")
_LEAD_CHARS = 48
_FUNCTION_WORDS = frozenset(
    "a an the is are was were be been being to of in on at by for with from via into and "
    "or nor not no it its this that these those there here we you i he she they our your "
    "my me us them must should shall will would can could may might do does did has have "
    "had as if then than when where which who what how see ask use used set per least "
    "only all any each every more most less".split())
# Screening: an assignment can only be where one of these is (by substring search).
_ASSIGNMENT_WORDS = ("secret", "token", "pass", "pwd", "cred", "key", "auth", "sig=")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_NAME_REACH = 82  # a name's longest run before its secret word, dashes included
_QUOTES = "\"'`"



def _name_starts(text: str, lowered: str) -> Iterator[tuple[int, int]]:
    """(start of the name, position of its secret word) for each secret word found by
    substring search: the name is the identifier around the word. Each character is
    scanned back over once, so this stays linear on "passwordpassword..."."""
    hits: list[int] = []
    for word in _ASSIGNMENT_WORDS:  # str.find per word beats one regex alternation
        at = lowered.find(word)
        while at != -1:
            hits.append(at)
            at = lowered.find(word, at + len(word))
    hits.sort()
    prev_at, prev_start = -1, -1
    for at in hits:
        floor = max(0, at - _NAME_REACH)
        start = at
        while start > floor and text[start - 1] in _NAME_CHARS:
            start -= 1
            if start == prev_at:  # the previous word's name runs on to this one
                start = max(prev_start, floor)
                break
        prev_at = at
        if start != prev_start:
            prev_start = start
            yield start, at


def _value(text: str, pos: int) -> tuple[int, int, bool] | None:
    """The value that starts at ``pos``: (start, end, quoted). A quoted one ends at its
    closing quote on the same line; a bare one at white space or a delimiter, and is
    code when a call, index or generic follows (``getpass()``, ``os.environ[...]``)."""
    quote = text[pos : pos + 1]
    if quote == "\\" and text[pos + 1 : pos + 2] in _QUOTES:
        quote = text[pos : pos + 2]
    if quote and quote[-1] in _QUOTES:
        start = pos + len(quote)
        close = text.find(quote, start, start + MAX_VALUE + 1)
        if close <= start or text.find("\n", start, close) != -1:
            return None
        if quote == "`" and text.find(" ", start, close) != -1:
            return None  # `etcdctl get /secret`: a shell command, not a literal
        return start, close, True
    bare = _BARE.match(text, pos)
    if bare is None or text[bare.end() : bare.end() + 1] in ("(", "[", "{", "<"):
        return None
    if text.find("&", pos, bare.end()) == -1:
        return pos, bare.end(), False
    query = _QUERY_NEXT.search(text, pos, bare.end())  # token=abc&user=x: stop at &
    return pos, query.start() if query is not None else bare.end(), False


def _line_start(text: str, m: re.Match[str]) -> bool:
    """Whether the name at ``m`` begins a configuration line (YAML, INI, .env)."""
    line = text.rfind("\n", max(0, m.start() - _LEAD_CHARS), m.start()) + 1
    if line == 0 and m.start() > _LEAD_CHARS:
        return False
    return _LINE_LEAD.fullmatch(text, line, m.start()) is not None


def _passphrase(text: str, start: int, line_start: bool) -> int | None:
    """Where a passphrase that starts at ``start`` ends: the rest of a configuration
    line (the name begins the line) made of two to eight plain words, none of them a
    function word ("password: correct horse battery staple", not "password: see the
    vault")."""
    if not line_start:
        return None
    phrase = _PHRASE.match(text, start)
    if phrase is None or not _FUNCTION_WORDS.isdisjoint(phrase.group().lower().split()):
        return None
    return start + len(phrase.group().rstrip())


def _assigned(text: str, m: re.Match[str]) -> tuple[tuple[int, int] | None, int]:
    """The value assigned at ``m`` if the name and the value say it is a secret, and
    where the value ends (a secret word inside it names nothing)."""
    name, op, dash, closed = m.group("name", "op", "dash", "closed")
    if text.endswith("[REDACTED:", 0, m.start("name")):
        return None, m.end()
    tier = name_tier(name)
    signed = op != "" and op[0] in "=:!?.,"
    if dash and not signed and name.lower().startswith(_NEGATED):
        return None, m.end()  # "--no-token serves ...": a switch that takes no value
    if tier == NOT_SECRET or (tier != ANY_LITERAL and not signed):
        return None, m.end()  # "key 2026-01-05": only a password, secret or token states one
    found = _value(text, m.end())
    if found is None:
        return None, m.end()
    start, end, quoted = found
    examined = end
    if not quoted:
        end = start + len(text[start:end].rstrip(".:"))  # a sentence or a block ends
    value = text[start:end]
    if not value:
        return None, examined
    # NAME=value with nothing around the sign: the whole field, whatever follows.
    tight = op in ("=", ":=") and m.end() == m.end("op") and m.start("op") == m.end("name")
    if op == ",":  # ("API_TOKEN", "...") is also any list of strings: only a random one
        ok = looks_random(value)
    elif quoted:
        ok = literal_secret(value, quoted=True) if tier == ANY_LITERAL else looks_random(value)
    elif not signed:  # "token abc...", "password is ...", "--password VALUE"
        ok = literal_secret(value, quoted=True) if dash else looks_random(value)
    elif tier != ANY_LITERAL:
        ok = looks_random(value)
    elif op == ":" and not closed and not (line_start := _line_start(text, m)):
        ok = looks_random(value)  # "as a secret: nothing" is prose, not a mapping
    elif tight or _FIELD_END.match(text, end) is not None:
        ok = literal_secret(value, quoted=False)
    elif (phrase_end := _passphrase(text, start, line_start if op == ":" and not closed
                                    else _line_start(text, m))) is not None:
        return (start, phrase_end), phrase_end
    else:  # more follows on the line: only a random value is one
        ok = looks_random(value)
    return ((start, end) if ok else None), examined


def _element(m: re.Match[str]) -> bool:
    tier = name_tier(m.group("name"))
    if tier == ANY_LITERAL:
        return literal_secret(m.group("secret"), quoted=True)
    return tier != NOT_SECRET and looks_random(m.group("secret"))


def assignments(text: str, lowered: str) -> list[tuple[int, int]]:
    """Where the values assigned to secret names are in ``text`` (``lowered`` is
    ``text.lower()``), as (start, end), in text order."""
    spans: list[tuple[int, int]] = []
    examined = 0  # the end of the last value read
    for start, at in _name_starts(text, lowered):
        if at < examined:
            continue
        m = _NAME_OP.match(text, start)
        span: tuple[int, int] | None = None
        if m is not None and at < m.end("name"):
            span, examined = _assigned(text, m)
        elif text[start - 1 : start] == "<":  # <password>...</password>
            element = _XML_ELEMENT.match(text, start - 1)
            if element is not None and _element(element):
                span = element.span("secret")
        elif text[start - 1 : start] == '"':  # <add key="Password" value="..." />
            found = _KEY_VALUE_ATTRIBUTES.search(text, max(0, start - 16), start + 400)
            if found is not None and _element(found):
                span = found.span("secret")
        if span is not None:
            spans.append(span)
            examined = max(examined, span[1])
    return spans
