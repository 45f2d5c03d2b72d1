"""Provider credentials recognised by their published prefix (``ghp_``, ``npm_``,
``sk-ant-``, ``AKIA`` ...), after the rule sets of gitleaks and trufflehog.

Each shape is a prefix and a body: the characters a token of that provider is made of,
with a length range. The scanners pin the documented length (``npm_`` and 36
characters); here a distinctive prefix (one with ``_``, ``-`` or ``.`` in it, or a
long one) accepts 20 characters or more, up to a bound, because a token cut short by a
copy or from a newer, longer format is still a credential. The body must look random
(nodes.extract.secret_values.random_token): "sk-learn-pipelines" or
``ghp_xxxxxxxx...`` is not a key. Prefixes that could begin an ordinary word or hex
string (``SK``, ``key-``, ``dapi``, ``AIza``) keep the documented length.

Why matching stays cheap and linear: a token is a word of 20 or more characters, which
prose rarely has, so the words are listed first (``str.split``); only inside a long
word is a prefix searched, by one regex built as a trie of all prefixes, and each hit
is matched against its shape's body with a possessive, bounded quantifier.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from nodes.extract.secret_values import placeholder, random_token

__all__ = ["MIN_TOKEN", "SHAPE_KINDS", "Token", "tokens_in"]

MIN_TOKEN = 20  # the shortest token of any shape below, prefix included

_AN, _ANU, _ANUD = "A-Za-z0-9", "A-Za-z0-9_", r"A-Za-z0-9_\-"  # "-" escaped: classes grow
_B64 = "A-Za-z0-9+/="
_LONG = 255  # the longest body a distinctive prefix accepts (GitHub allows 255)

# (kind, prefixes, body characters, shortest body, longest body)
_TABLE: tuple[tuple[str, tuple[str, ...], str, int, int], ...] = (
    ("aws_access_key", ("AKIA", "ASIA", "ABIA", "ACCA"), "A-Z0-9", 16, 16),
    ("aws_access_key", ("A3T",), "A-Z0-9", 17, 17),
    ("aws_session_token", ("IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdz", "FQoGZXIvYXdz"), _B64, 80, 4096),
    ("aws_bedrock_key", ("ABSK",), _B64, 100, 300),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _AN, 20, _LONG),
    ("github_token", ("github_pat_",), _ANU, 20, _LONG),
    ("gitlab_token", ("glpat-", "glrt-"), _ANUD + ".", 20, 300),
    ("gitlab_token", ("gldt-", "glptt-", "glcbt-", "gloas-", "glsoat-", "glft-", "glimt-",
                      "glagent-", "glffct-", "GR1348941"), _ANUD, 20, 300),
    ("slack_token", ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "xoxo-", "xoxe-",
                     "xoxe.xoxb-", "xoxe.xoxp-", "xapp-"), _AN + r"\-", 15, 250),
    ("stripe_key", ("sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_"),
     _AN, 12, 247),
    ("stripe_key", ("whsec_",), _B64, 20, 128),
    ("anthropic_key", ("sk-ant-",), _ANUD, 20, 300),
    ("openai_key", ("sk-",), _ANUD, 20, 300),
    ("google_api_key", ("AIza",), _ANUD, 30, 45),
    ("google_oauth", ("GOCSPX-",), _ANUD, 20, 64),
    ("google_oauth", ("ya29.",), _ANUD + ".", 20, 2048),
    ("npm_token", ("npm_",), _AN, 20, _LONG),
    ("pypi_token", ("pypi-",), _ANUD, 30, 1000),
    ("huggingface_token", ("hf_", "api_org_"), _AN, 20, _LONG),
    ("rubygems_token", ("rubygems_",), _AN, 20, 96),
    ("nuget_key", ("oy2",), "a-z0-9", 43, 43),
    ("docker_token", ("dckr_pat_", "dckr_oat_"), _ANUD, 20, 96),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), _AN, 32, 128),
    ("shopify_token", ("shpat_", "shpca_", "shppa_", "shpss_"), _AN, 20, 64),
    ("vault_token", ("hvs.", "hvb."), _ANUD, 24, 400),
    ("databricks_token", ("dapi",), "a-f0-9", 32, 32),
    ("grafana_token", ("glc_",), _B64, 32, 400),
    ("grafana_token", ("glsa_",), _ANU, 30, 64),
    ("linear_key", ("lin_api_",), _AN, 20, 64),
    ("notion_token", ("ntn_",), _AN, 30, 64),
    ("postman_key", ("PMAK-",), _AN + r"\-", 40, 80),
    ("pulumi_token", ("pul-",), _AN, 32, 64),
    ("sentry_token", ("sntrys_",), _B64 + "_", 40, 400),
    ("sentry_token", ("sntryu_",), _AN, 32, 128),
    ("age_secret_key", ("AGE-SECRET-KEY-1",), "0-9A-Z", 50, 70),
    ("onepassword_token", ("ops_eyJ",), _B64 + r"_\-", 100, 4096),
    ("heroku_key", ("HRKU-",), _ANUD, 40, 80),
    ("atlassian_token", ("ATATT3", "ATCTT3"), _ANUD + "=", 50, 400),
    ("bitbucket_token", ("ATBB",), _AN, 28, 64),
    ("doppler_token", ("dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."),
     _AN, 30, 64),
    ("planetscale_token", ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"), _ANUD + ".=", 20, 64),
    ("perplexity_key", ("pplx-",), _AN, 20, 96),
    ("groq_key", ("gsk_",), _AN, 20, 96),
    ("xai_key", ("xai-",), _AN, 20, 128),
    ("replicate_token", ("r8_",), _AN, 20, 64),
    ("langsmith_key", ("lsv2_pt_", "lsv2_sk_"), _ANU, 20, 96),
    ("tavily_key", ("tvly-",), _AN + r"\-", 20, 64),
    ("pinecone_key", ("pcsk_",), _ANU, 20, 128),
    ("supabase_token", ("sbp_", "sb_secret_"), _ANUD, 20, 64),
    ("tailscale_key", ("tskey-",), _AN + r"\-", 20, 128),
    ("figma_token", ("figd_",), _ANUD, 20, 64),
    ("netlify_token", ("nfp_",), _AN, 20, 64),
    ("square_token", ("sq0atp-", "sq0csp-"), _ANUD, 22, 64),
    ("prefect_key", ("pnu_",), _AN, 20, 64),
    ("readme_key", ("rdme_",), _AN, 20, 96),
    ("sourcegraph_token", ("sgp_",), _ANU, 20, 96),
    ("sonar_token", ("squ_", "sqp_", "sqa_"), _AN, 20, 64),
    ("sendinblue_key", ("xkeysib-",), _AN + r"\-", 60, 100),
    ("twilio_key", ("SK",), "0-9a-fA-F", 32, 32),
    ("mailgun_key", ("key-",), "0-9a-f", 32, 32),
    ("alibaba_key", ("LTAI",), _AN, 20, 20),
    ("artifactory_key", ("AKCp",), _AN, 60, 80),
    ("easypost_key", ("EZAK", "EZTK"), _AN, 54, 54),
    ("contentful_token", ("CFPAT-",), _ANUD, 40, 64),
    ("clojars_token", ("CLOJARS_",), _AN, 40, 80),
    ("dynatrace_token", ("dt0c01.",), _AN + ".", 80, 100),
    ("frameio_token", ("fio-u-",), _ANUD + "=", 40, 80),
    ("duffel_token", ("duffel_live_", "duffel_test_"), _ANUD + "=", 30, 64),
    ("shippo_token", ("shippo_live_", "shippo_test_"), _AN, 32, 64),
    ("flutterwave_key", ("FLWSECK_TEST-", "FLWSECK-"), _AN + r"\-", 12, 64),
    ("scalingo_token", ("tk-us-",), _ANUD, 40, 64),
    ("flyio_token", ("fo1_",), _ANUD, 30, 64),
    ("flyio_token", ("fm1r_", "fm1a_", "fm2_"), _B64, 80, 4096),
    ("mapbox_token", ("sk.eyJ",), _ANUD + ".", 50, 400),
    ("facebook_token", ("EAAC", "EAAM", "EAAG"), _AN, 90, 400),
    ("twitter_token", ("AAAAAAAAAAAAAAAAAAAAA",), _AN + "%", 60, 140),
    ("openshift_token", ("sha256~",), _ANUD, 40, 48),
    ("adobe_secret", ("p8e-",), _AN, 20, 64),
    ("artifactory_key", ("cmVmd",), _AN, 50, 70),
    ("aws_bedrock_key", ("bedrock-api-key-",), _B64, 20, 4096),
    ("clickhouse_key", ("4b1d",), _AN, 38, 38),
    ("gitlab_token", ("_gitlab_session=",), "a-z0-9", 32, 32),
    ("grafana_token", ("eyJrIjoi",), _B64, 60, 400),
    ("infracost_token", ("ico-",), _AN, 28, 40),
    ("intra42_secret", ("s-s4t2ud-", "s-s4t2af-"), _AN, 60, 70),
    ("octopus_key", ("API-",), "A-Z0-9", 26, 26),
    ("settlemint_token", ("sm_aat_", "sm_pat_", "sm_sat_"), _AN, 16, 40),
    ("square_token", ("EAAA",), _ANUD, 22, 64),
    ("typeform_token", ("tfp_",), _ANUD + ".=", 40, 80),
    ("vault_token", ("s.",), _AN, 24, 24),
)
# Shapes that are not a prefix and a body: (kind, needles, shortest match, regex). Each
# is searched only in the long words that hold one of its needles and are long enough.
_PATTERNS: tuple[tuple[str, tuple[str, ...], int, str], ...] = (
    ("jwt", ("eyJ",), 23, r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,4096}+\.eyJ[A-Za-z0-9_-]{8,8192}+"
     r"(?:\.[A-Za-z0-9_-]{0,2048}+)?(?![A-Za-z0-9_-])"),
    ("slack_webhook", ("hooks.slack.com",), 45,
     r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,200}+"),
    ("discord_webhook", ("/api/webhooks/",), 60,
     r"https://(?:[a-z]{1,10}\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/"
     r"[A-Za-z0-9_-]{40,80}+"),
    ("discord_token", (".",), 59, r"(?<![A-Za-z0-9_-])[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}"
     r"\.[A-Za-z0-9_-]{27,38}+(?![A-Za-z0-9_-])"),
    ("teams_webhook", (".webhook.office.com/",), 80,
     r"https://[A-Za-z0-9-]{1,60}\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{40,300}+"),
    ("sendgrid_key", ("SG.",), 63,
     r"(?<![A-Za-z0-9_-])SG\.[A-Za-z0-9_=.-]{60,80}+(?![A-Za-z0-9_=.-])"),
    ("telegram_token", (":",), 44,
     r"(?<![0-9])[0-9]{8,10}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
    ("mailchimp_key", ("-us",), 36, r"(?<![A-Za-z0-9])[0-9a-f]{32}-us[0-9]{1,2}(?![0-9])"),
    ("azure_client_secret", ("Q~",), 37,
     r"(?<![A-Za-z0-9_~.])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}+(?![A-Za-z0-9_~.-])"),
    ("terraform_token", (".atlasv1.",), 83,
     r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}+"),
    ("onepassword_token", ("A3-",), 39,
     r"(?<![A-Za-z0-9])A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})"
     r"-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}(?![A-Za-z0-9])"),
    ("airtable_token", ("pat",), 82,
     r"(?<![A-Za-z0-9])pat[A-Za-z0-9]{14}\.[a-f0-9]{64}(?![a-f0-9])"),
    ("authress_key", (".acc",), 60,
     r"(?<![A-Za-z0-9_])(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}"
     r"\.acc[_-][a-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}+"),
    ("cloudflare_ca_key", ("v1.0-",), 176, r"(?<![A-Za-z0-9])v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    ("facebook_token", ("|", "%"), 43,
     r"(?<![0-9])[0-9]{15,16}(?:\||%7C|%)[A-Za-z0-9_-]{27,40}+(?![A-Za-z0-9_-])"),
    ("harness_key", ("pat.", "sat."), 72, r"(?<![A-Za-z0-9])(?:pat|sat)\.[A-Za-z0-9_-]{22}"
     r"\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    ("maxmind_key", ("_mmk",), 40, r"(?<![A-Za-z0-9])[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),
)
# Shapes whose body needs only not be a mask (AKIAXXXXXXXXXXXXXXXX): AWS documents a key
# id ending in EXAMPLE, and one that people paste costs nothing to redact.
_NOT_CHECKED = frozenset({"aws_access_key"})


@dataclass(frozen=True)
class Token:
    start: int
    end: int
    kind: str
    rank: int  # position in the tables: the more specific shape first


@dataclass(frozen=True)
class _Shape:
    kind: str
    prefix: str
    body: re.Pattern[str]
    extent: re.Pattern[str]  # the whole run of body characters
    longest: int
    rank: int


def _trie(words: list[str]) -> str:
    """A regex that matches any of ``words``, longest first, sharing their prefixes."""
    tree: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict) -> str:  # type: ignore[type-arg]
        alternatives = [re.escape(c) + emit(node[c]) for c in sorted(k for k in node if k)]
        if not alternatives:
            return ""
        body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        if "" not in node:
            return body
        return ("(?:" + body + ")" if len(alternatives) == 1 and len(body) > 1 else body) + "?"

    return emit(tree)


@dataclass(frozen=True)
class _Compiled:
    prefix: re.Pattern[str]  # any prefix of the table (a trie)
    shapes: dict[str, _Shape]  # prefix -> its shape
    patterns: tuple[tuple[str, int, re.Pattern[str], int], ...]  # kind, shortest, regex, rank
    any_needle: re.Pattern[str]  # any needle of the pattern shapes (a trie)


# needle -> the patterns that hold it
_BY_NEEDLE: dict[str, tuple[int, ...]] = {
    needle: tuple(i for i, entry in enumerate(_PATTERNS) if needle in entry[1])
    for needle in {n for entry in _PATTERNS for n in entry[1]}}


@cache
def _compiled() -> _Compiled:
    """The regexes, compiled when a first turn holds a long word (about a hundred of
    them: compiling them at import cost a server's start-up more than most turns ever
    need, since most turns hold no word of 20 characters)."""
    shapes: dict[str, _Shape] = {}
    for rank, (kind, prefixes, chars, shortest, longest) in enumerate(_TABLE):
        body = re.compile(f"[{chars}]{{{shortest},{longest}}}+(?![{chars}])")
        extent = re.compile(f"[{chars}]*+")
        for prefix in prefixes:
            shapes[prefix] = _Shape(kind, prefix, body, extent, longest, rank)
    patterns = tuple((kind, shortest, re.compile(source), len(_TABLE) + i)
                     for i, (kind, _, shortest, source) in enumerate(_PATTERNS))
    return _Compiled(re.compile(_trie(sorted(shapes))), shapes, patterns,
                     re.compile(_trie(sorted(_BY_NEEDLE))))

_MAX_NEEDLE_HITS = 64
# A token starts where a word does: not inside another token, identifier or file name
# (video_box.ico-7a38...png).
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
SHAPE_KINDS = tuple(dict.fromkeys([k for k, *_ in _TABLE] + [k for k, *_ in _PATTERNS]))


def _prefixed(text: str, start: int, end: int, regexes: _Compiled) -> Iterator[Token]:
    pos = start
    while (m := regexes.prefix.search(text, pos, end)) is not None:
        pos = m.start() + 1
        if m.start() > 0 and text[m.start() - 1] in _TOKEN_CHARS:
            continue
        shape = regexes.shapes[m.group()]  # the trie matches whole prefixes only
        body = shape.body.match(text, m.end(), end)
        if body is None:
            run = shape.extent.match(text, m.end(), end)
            if run is not None and run.end() - m.end() > shape.longest:
                pos = run.end()  # too long for a token: what starts inside is part of it
            continue
        if (not placeholder(body.group()) if shape.kind in _NOT_CHECKED
                else random_token(body.group())):
            yield Token(m.start(), body.end(), shape.kind, shape.rank)
            pos = body.end()


def _runs(text: str) -> list[tuple[int, int]]:
    """Where the words of 20 or more characters are (``str.split`` and a length test is
    the cheapest way to find that a turn of prose holds none)."""
    runs: list[tuple[int, int]] = []
    cursor = 0
    for word in [w for w in text.split() if len(w) >= MIN_TOKEN]:
        start = text.find(word, cursor)
        cursor = start + len(word)
        runs.append((start, cursor))
    return runs


def _patterned(text: str, start: int, end: int, regexes: _Compiled) -> Iterator[Token]:
    """The pattern shapes in ``text[start:end]``: those whose needle is there (one scan
    for all needles) and that fit in the word."""
    tried: set[int] = set()
    for count, hit in enumerate(regexes.any_needle.finditer(text, start, end)):
        if count == _MAX_NEEDLE_HITS:  # a long run of needles (a.b.c.d...): ask each once
            for index, (_, needles, _, _) in enumerate(_PATTERNS):
                if index not in tried and any(text.find(n, start, end) != -1 for n in needles):
                    yield from _matches(text, start, end, regexes.patterns[index])
            return
        for index in _BY_NEEDLE[hit.group()]:
            if index not in tried:
                tried.add(index)
                yield from _matches(text, start, end, regexes.patterns[index])


def _matches(text: str, start: int, end: int,
             entry: tuple[str, int, re.Pattern[str], int]) -> Iterator[Token]:
    kind, shortest, pattern, rank = entry
    if end - start >= shortest:
        yield from (Token(m.start(), m.end(), kind, rank)
                    for m in pattern.finditer(text, start, end) if random_token(m.group()))


def tokens_in(text: str) -> list[Token]:
    """Provider tokens in ``text``, in text order (they may overlap; the caller keeps
    the earliest, longest, most specific)."""
    runs = _runs(text)
    if not runs:  # no word long enough to be a token: most turns
        return []
    regexes = _compiled()
    found: list[Token] = []
    for start, end in runs:
        if regexes.prefix.search(text, start, end) is not None:  # most long words hold none
            found.extend(_prefixed(text, start, end, regexes))
        if regexes.any_needle.search(text, start, end) is not None:
            found.extend(_patterned(text, start, end, regexes))
    return found
