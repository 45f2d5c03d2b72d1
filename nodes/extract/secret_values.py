"""Whether a name says it holds a secret, and whether a value is a literal secret.

The redaction detectors (nodes.extract.secrets) ask two questions of an assignment
such as ``DB_PASSWORD=...``:

* **the name** (:func:`name_tier`): split into words (``DB``, ``PASSWORD``;
  ``signingKey`` gives ``signing``, ``key``), it says *secret* when a word is a secret
  noun, as the scanners' keyword lists have it (password, passphrase, secret, token,
  credential, an API/private/access/... key), unless a word after that noun names
  something about the secret rather than the secret (``PASSWORD_MIN_LENGTH``,
  ``token_type``, ``SECRET_NAME``, ``key_id``) or a word before it names something
  that is not one (``public_key``, ``primary_key``, ``max_tokens``, ``page_token``).
  A password, secret, token or credential name, or a key qualified as one (API,
  private, access, signing ... key) makes any literal value a secret
  (:data:`ANY_LITERAL`); another qualified key, or "auth", needs a value that looks
  random (:data:`RANDOM_ONLY`); a bare ``key`` names a map entry: ``key = "user_id"``.
* **the value**: a literal (:func:`literal_secret`) is anything but a placeholder
  (``${TOKEN}``, ``<password>``, ``********``, ``YOUR_API_KEY``, ``changeme``: a value
  made only of placeholder words), a number with separators (a date, a version; digits
  alone are a PIN), a path or URL, a type or status word
  (``str``, ``required``, ``true``) or, when not quoted, a reference to another
  variable (``settings.SECRET_KEY``, ``db_password``). A value that merely contains
  such a word is still a secret: ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`` is.
  :func:`looks_random` asks more: letters with digits or symbols, varied enough.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

__all__ = [
    "ANY_LITERAL",
    "NOT_SECRET",
    "RANDOM_ONLY",
    "identifier_like",
    "literal_secret",
    "looks_random",
    "name_tier",
    "placeholder",
    "random_token",
]

NOT_SECRET, RANDOM_ONLY, ANY_LITERAL = 0, 1, 2

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Secret nouns (detect-secrets' keyword list, gitleaks' generic rule), as a word of the
# name or the end of one written without separators ("dbpassword", "authtoken").
_SECRET_NOUNS = ("password", "passwd", "passwords", "passphrase", "passcode", "pwd", "secret",
                 "token", "credential", "credentials", "creds", "apikey", "accesskey",
                 "secretkey", "privatekey", "authkey", "clientsecret", "contrasena",
                 "contraseña", "passwort", "motdepasse")
_PASS_WORDS = frozenset({"pass", "pw"})  # secret only with a qualifier: DB_PASS, keyPass
_KEY_WORDS = frozenset({"key"})
_AUTH_WORDS = frozenset({"auth", "sig"})  # sig: a signed URL's signature (Azure SAS)
# Qualifiers that make "key" a secret of its own: API_KEY, SIGNING_KEY, ENCRYPTION_KEY.
_SECRET_KEY_QUALIFIERS = frozenset(
    "api auth access secret private priv client service account db database signing sign "
    "encryption encrypt decryption crypt crypto master license licence app application "
    "webhook session hmac shared storage sas consumer admin root ssh gpg pgp rsa aes jwt "
    "subscription deploy deployment integration ingest ingestion write read management "
    "mgmt partner merchant bot server user personal cookie otp totp mfa".split())
# Words that, after the secret noun, say the value is about the secret, not the secret.
_ABOUT_WORDS = frozenset(
    "length len size count counts limit limits max min maximum minimum type types kind "
    "name names id ids identifier url uri urls endpoint endpoints host path paths file "
    "files filename dir directory folder env var variable field fields column header "
    "headers param params parameter label hint prompt policy rule rules regex pattern "
    "format expiry expires expiration expired expire ttl timeout lifetime duration "
    "interval period age rotation rotate version enabled disabled enable disable "
    "required require set exists valid validation validator mode method scheme strategy "
    "provider manager store storage backend ref reference source location arn budget "
    "usage index position offset prefix suffix separator char chars characters bytes "
    "bits algorithm algo alg generator reset request response input output event "
    "events alias board code frame mesh pair press pressed ring selector signature "
    "stone storetype word up down left right binding bindings map stroke strokes vault "
    "spec description desc doc docs help text message msg error errors "
    "hash hashed digest fingerprint schema class holder handler helper "
    "issuer audience scope scopes status state check checker changed "
    "updated created".split())
# Words that, before the secret noun, say the value is not a secret: a public key, a
# database key, a pagination or CSRF token (Rails calls it authenticity_token), a count.
_NOT_SECRET_QUALIFIERS = frozenset(
    "public pub primary foreign sort partition cache hot idx index natural schema "
    "sequence bucket row lookup unique composite shard sharding routing meta max min num "
    "number total input output prompt completion context cached reasoning remaining used "
    "idempotency dedup dedupe next page pagination continuation cursor csrf xsrf "
    "authenticity anti forgery sync keyboard press dict map hash object item group sorting".split())
# Values that describe a secret or a type rather than being one.
_NOT_SECRET_VALUES = frozenset(
    "password passwd pass pw pwd secret secrets token none null nil undefined true false "
    "yes no on off hidden masked dummy test testing example sample placeholder redacted "
    "required optional string str int integer bool boolean bytes number float object any "
    "text char varchar unknown empty missing invalid expired revoked unset default "
    "bearer basic jwt oauth oauth2 opaque env environment secure sensitive confidential "
    "encrypted changeme".split())
# Placeholder vocabulary: a value made only of these (and separators) stands in for one.
_PLACEHOLDER_PARTS = re.compile(
    r"(?i)example|sample|dummy|fake|placeholder|changeme|change|replace|redacted|insert|"
    r"your|here|todo|tbd|secret|password|passwd|token|api|key|my|the|value|none|null|"
    r"with|real|actual|own|this|goes|put|enter|new|generated|demo|test|"
    r"xxx+|\*\*\*+|\.\.\.+|…+|•+")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_AT_TEMPLATE = re.compile(r"@[A-Za-z_][A-Za-z0-9_]*@")
_MASK_RUN = re.compile(r"[*#•]{4,}|[xX]{6,}|\.{6,}")
_SEPARATORS = re.compile(r"[._:/\\ -]+")
_WORDISH = re.compile(r"(?:[A-Za-z][a-z]+)+(?:[A-Z]{1,3})?[0-9]{0,5}|[A-Z]{2,}[0-9]{0,5}"
                      r"|[0-9]{1,8}|[A-Za-z]{1,3}[0-9]{0,3}")
_LETTERS_THEN_DIGITS = re.compile(r"[A-Za-z]{0,24}[0-9]{0,8}")
_VOWELS = frozenset("aeiouAEIOU")
# Six characters each one after the other, in the runs people type: one scan (in C) tells
# whether a value has any, before _without_sequences walks it.
_SEQUENCE_START = re.compile("|".join(
    re.escape(seq[i : i + 6]) for seq in ("0123456789", "abcdefghijklmnopqrstuvwxyz",
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for i in range(len(seq) - 5)))
_NUMBER_LIKE = re.compile(r"[0-9.,:_/+\- TtZz]{1,64}")
_REFERENCE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|::|->)[A-Za-z_$][A-Za-z0-9_$]*)+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYMBOLS = frozenset("!@#$%^&*+=~?|:/")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS = frozenset("0123456789")
MIN_LITERAL = 6
# Values repeat within a turn (a log) and across turns; values are up to 4 KB, so the
# caches of value judgements stay small (at most ~4 MB each).
_VALUES_CACHED = 1024


def _secret_noun(word: str) -> bool:
    return word in _SECRET_NOUNS or word.endswith(_SECRET_NOUNS)


@lru_cache(maxsize=4096)  # a turn names the same few variables again and again
def name_tier(name: str) -> int:
    """What a value assigned to ``name`` must be to count as a secret: nothing
    (:data:`NOT_SECRET`), random-looking (:data:`RANDOM_ONLY`) or any literal
    (:data:`ANY_LITERAL`). The last secret noun of the name decides
    (``KEY_STORE_PASSWORD`` holds a password)."""
    words = [w.lower() for w in _WORD.findall(name)]
    for i in range(len(words) - 1, -1, -1):
        word, before = words[i], words[i - 1] if i else ""
        if _secret_noun(word) or (word in _PASS_WORDS and before):
            tier = ANY_LITERAL
        elif word in _KEY_WORDS:
            if not before:
                return NOT_SECRET  # a bare "key" names a map or cache entry
            tier = ANY_LITERAL if before in _SECRET_KEY_QUALIFIERS else RANDOM_ONLY
        elif word in _AUTH_WORDS:
            tier = RANDOM_ONLY
        else:
            continue
        if before in _NOT_SECRET_QUALIFIERS or any(
                w in _ABOUT_WORDS or w.removesuffix("s") in _ABOUT_WORDS for w in words[i + 1 :]):
            return NOT_SECRET
        return tier
    return NOT_SECRET


@lru_cache(maxsize=_VALUES_CACHED)
def placeholder(value: str) -> bool:
    """A template (``${X}``, ``<x>``, ``{{x}}``, ``%s``, ``@X@``), a mask (``****``,
    ``sk-xxxxxxxx``), a value already redacted, a run of one character or of the
    alphabet (``AIzaaaaaaa``, ``abcdefgh``), or one made only or mostly of placeholder
    words and such runs (``YOUR_API_KEY``, ``sha256~PUT_YOUR_TOKEN_HERE``)."""
    if value[:1] in ("$", "%", "<", "{", "[") or len(set(value)) < 3:
        return True
    if value.lower() in _NOT_SECRET_VALUES or _AT_TEMPLATE.fullmatch(value) is not None:
        return True
    if _MASK_RUN.search(value) is not None:
        return True
    if max(map(value.count, set(value))) * 2 > len(value):
        return True  # one character makes most of it
    rest = _SEPARATORS.sub("", _PLACEHOLDER_PARTS.sub("", _without_sequences(value)))
    return len(rest) < 4 or (len(rest) < 8 and len(rest) * 3 <= len(value))


def _without_sequences(value: str, run: int = 6) -> str:
    """``value`` without its runs of ``run`` or more characters each one after the
    other (``abcdefg``, ``123456789``: what people type for a dummy)."""
    if len(value) < run or _SEQUENCE_START.search(value) is None:
        return value
    keep = [True] * len(value)
    start = 0
    for i in range(1, len(value) + 1):
        if i == len(value) or ord(value[i]) != ord(value[i - 1]) + 1:
            if i - start >= run:
                keep[start:i] = [False] * (i - start)
            start = i
    return "".join(c for c, k in zip(value, keep, strict=True) if k)


@lru_cache(maxsize=_VALUES_CACHED)
def identifier_like(value: str) -> bool:
    """Words, not randomness: the parts between separators are words, CamelCase words,
    short stems and numbers (``jetbrains.mps.v8_elimination``, ``id-Gost28147-89-None``),
    or letters then digits with as many vowels as words have (``Need5_T00-be-exactly``).
    Random tokens interleave letters and digits and have few vowels."""
    parts = [p for p in _SEPARATORS.split(value) if p]
    if not parts or (len(parts) == 1 and not any(c.isupper() for c in value)):
        return False  # one lowercase run: a word or random letters, the caller decides
    if all(_WORDISH.fullmatch(p) is not None for p in parts):
        return True
    if not all(_LETTERS_THEN_DIGITS.fullmatch(p) is not None for p in parts):
        return False
    letters = [c for c in value if c.isalpha()]
    return len(letters) >= 4 and sum(c in _VOWELS for c in letters) * 4 >= len(letters)


def _not_a_literal(value: str) -> bool:
    """A number with separators (a date, a version, an amount), a path or a URL. Digits
    alone are a literal: a PIN or a numeric key."""
    return ((_NUMBER_LIKE.fullmatch(value) is not None and not value.isdigit())
            or "://" in value or value[0] in "/~." or value[1:3] in (":\\", ":/"))


@lru_cache(maxsize=_VALUES_CACHED)
def literal_secret(value: str, *, quoted: bool) -> bool:
    """Any literal that is not a placeholder, number, path, URL, type or status word; an
    unquoted value must not be a reference to another variable either."""
    if len(value) < MIN_LITERAL or _ALNUM.search(value) is None:
        return False
    if placeholder(value) or _not_a_literal(value):
        return False
    if not quoted:
        if _REFERENCE.fullmatch(value) is not None and not looks_random(value):
            return False  # settings.SECRET_KEY, os.environ, self.token
        if (_IDENTIFIER.fullmatch(value) and name_tier(value) != NOT_SECRET
                and not looks_random(value)):
            return False  # password=db_password: another variable
    return True


def _shannon(value: str, chars: set[str]) -> float:
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in map(value.count, chars))


@lru_cache(maxsize=_VALUES_CACHED)
def looks_random(value: str) -> bool:
    """A literal secret, not a word, identifier, placeholder, URL, date or version:
    letters with digits or symbols, varied enough (Shannon entropy of 2.5 bits a
    character)."""
    chars = set(value)
    if len(value) < 8 or len(chars) < 5 or value[0] in "/.~" or "://" in value:
        return False
    if " " in chars or "\t" in chars:
        return False  # a random token has no spaces; a sentence does
    letters = sum(value.count(c) for c in chars & _LETTERS)
    if letters == 0 or (chars.isdisjoint(_DIGITS) and chars.isdisjoint(_SYMBOLS)):
        return False
    if letters <= 2 and _NUMBER_LIKE.fullmatch(value) is not None:
        return False  # 2026-01-05T10:00:00Z
    if placeholder(value) or identifier_like(value):
        return False
    return _shannon(value, chars) >= 2.5


@lru_cache(maxsize=_VALUES_CACHED)
def random_token(body: str) -> bool:
    """The part of a provider token after its prefix: random, not a placeholder or
    words. Digits with letters, or mixed case over 16 characters, or (some providers
    issue letters only) 20 letters or more with few vowels: English runs near 40%
    vowels, random letters near 20%."""
    chars = set(body)
    if len(chars) < 6 or placeholder(body) or identifier_like(body):
        return False
    digits, lower = not chars.isdisjoint(_DIGITS), any(c.islower() for c in chars)
    upper = any(c.isupper() for c in chars)
    letters = [c for c in body if c.isalpha()]
    mixed = (digits and (lower or upper)) or (lower and upper and len(body) >= 16)
    if not mixed and (len(letters) < 20
                      or sum(c in _VOWELS for c in letters) * 10 > len(letters) * 3):
        return False
    return _shannon(body, chars) >= 2.5
