"""Secrets found by detect-secrets' plugins: the providers' token formats as a maintained set keeps them.

detect-secrets (Yelp) is a maintained collection of credential formats; each
plugin is a list of regular expressions (``RegexBasedDetector.denylist``). The
plugins adopted here are those whose formats our own detectors do not cover
(GitLab, SendGrid, Twilio, npm's ``.npmrc``, PyPI, Discord, Telegram,
Mailchimp, Square, Artifactory, Azure Storage, OpenAI's marked keys). Their
keyword-assignment plugins (``ibm_api_key = ...``) are left out: the key rule
(``ledger.redact.keys``) finds a value under any secret-named key already, and
their high-entropy plugins replace any random-looking word (hashes, ids), which
precision forbids.

Each plugin becomes one ``Detector`` in the chain, with what the chain needs
beside the plugin's patterns: the needles its gate looks for (literals every
match holds), a Hyperscan ``sign`` for the prefilter (the plugin's own patterns,
loosened to what Hyperscan compiles: lookarounds left out, ``{m,n}`` read as
``{m,}``, so a text they find something in is never clean), and a boundary: a
match that starts inside a longer word (``TASK`` + 32 letters) is not a token.
The patterns are read with ``re.ASCII``: tokens are ASCII, and Hyperscan's
``\\d`` and ``\\w`` are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from .detectors import Detector

__all__ = ["PLUGIN_DETECTORS", "plugin_detector", "plugin_sign"]

# The shortest match of any adopted plugin (a GitLab token: "glpat-" and 20): the gate reads long words only.
_MIN_WORD = 25

# (plugin, marker kind, needles: literals one of which every match of its patterns holds)
_ADOPTED: tuple[tuple[type[RegexBasedDetector], str, tuple[str, ...]], ...] = (
    (GitLabTokenDetector, "token", ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-", "glimt-",
                                    "glptt-", "glagent-", "gloas-")),
    (SendGridDetector, "key", ("SG.",)),
    (TwilioKeyDetector, "key", ("AC", "SK")),
    (NpmDetector, "token", (":_authToken=",)),
    (PypiTokenDetector, "token", ("pypi-AgE",)),
    (DiscordBotTokenDetector, "token", (".",)),
    (TelegramBotTokenDetector, "token", (":",)),
    (MailchimpDetector, "key", ("-us",)),
    (SquareOAuthDetector, "key", ("sq0csp-",)),
    (ArtifactoryDetector, "key", ("AKC", "AP")),
    (AzureStorageKeyDetector, "key", ("AccountKey=",)),
    (OpenAIDetector, "key", ("T3BlbkFJ",)),
)  # fmt: skip
# Artifactory's password pattern (AP, a hex digit, 8 letters) is any capitalized word such as
# "APIKeyManager" or "APDefinition": no proof of a secret, so only its API token (AKC...) is read.
_LEFT_OUT = frozenset({r"(?:\s|=|:|\"|^)AP[\dABCDEF][a-zA-Z0-9]{8,}(?:\s|\"|$)"})

_LOOKAROUND = re.compile(r"\(\?<?[=!](?:[^()\\]|\\.)*\)")  # (?!\w), (?<=x): no parentheses inside
_BOUNDED = re.compile(r"\{(\d+),\d+\}")
_WORD_CHAR = re.compile(r"[A-Za-z0-9]")


def plugin_sign(patterns: Iterable[re.Pattern[str]]) -> bytes:
    """A Hyperscan pattern matching wherever one of ``patterns`` does (a looser one): their
    lookarounds dropped (an assertion only narrows) and each ``{m,n}`` read as ``{m,}``."""
    parts = []
    for p in patterns:
        source = _BOUNDED.sub(r"{\1,}", _LOOKAROUND.sub("", p.pattern))
        parts.append(f"(?i:{source})" if p.flags & re.IGNORECASE else f"(?:{source})")
    return "|".join(parts).encode()


def _spans_of(
    patterns: tuple[re.Pattern[str], ...], needles: tuple[str, ...]
) -> Callable[[str], list[tuple[int, int]]]:
    # A pattern that spells the assignment (``AccountKey=...``, ``:_authToken=...``) matches the
    # name too: the secret is what follows it, and the name is kept for the reader.
    names = tuple(n for n in needles if n.endswith("="))

    def find(text: str) -> list[tuple[int, int]]:
        found = []
        for pattern in patterns:
            for m in pattern.finditer(text):
                start, end = m.span()
                if (start and _WORD_CHAR.match(text[start - 1]) and _WORD_CHAR.match(text[start])) or (
                    "[REDACTED:" in m.group(0)
                ):
                    continue  # inside a longer word, or already replaced
                for name in names:
                    if (at := text.find(name, start, end)) >= 0:
                        start = at + len(name)
                        break
                found.append((start, end))
        return found

    return find


def plugin_detector(plugin: type[RegexBasedDetector], kind: str, needles: tuple[str, ...]) -> Detector:
    # Every plugin sets ``denylist`` as a class attribute (the base class declares an abstract property).
    denylist: tuple[re.Pattern[str], ...] = tuple(vars(plugin)["denylist"])
    patterns = tuple(
        re.compile(p.pattern, (p.flags & ~re.UNICODE) | re.ASCII) for p in denylist if p.pattern not in _LEFT_OUT
    )
    return Detector(
        kind,
        None,
        needles,
        min_word=_MIN_WORD,
        find=_spans_of(patterns, needles),
        sign=plugin_sign(patterns),
        origin=f"detect-secrets {plugin.__name__}",
    )


PLUGIN_DETECTORS: tuple[Detector, ...] = tuple(plugin_detector(*adopted) for adopted in _ADOPTED)
