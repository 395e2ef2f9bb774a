"""Secrets and personal data found by what they look like, wherever they sit in a string.

Each detector is a pattern, a cheap pre-check that spares most strings its
scan (substrings, looked for in the lowercased text when the pattern ignores
case, or a minimum count of digits), and where a shape alone is not proof a
validator: the Luhn checksum and issuer prefixes for cards, ISO 13616 for IBANs
(``python-stdnum``), libphonenumber for phone numbers (``phonenumbers``), the
Social Security Administration's rules for SSNs. A match is replaced by a typed
marker, ``[REDACTED:kind]``, so a reader knows what was there.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import phonenumbers
from publicsuffixlist import PublicSuffixList
from stdnum import iban, luhn

__all__ = [
    "DETECTORS",
    "MIN_AWS_SECRET",
    "MIN_NUMBER_DIGITS",
    "MIN_WORD",
    "Detector",
    "TextView",
    "marker",
]


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_DIGIT_BYTES = b"0123456789"
MIN_WORD = 15  # the shortest word-shaped secret (a Slack token); prose has few words this long
MIN_NUMBER_DIGITS = 8  # the fewest digits of a numeric one (a phone number with its country code)
MIN_AWS_SECRET = 40  # the one word-shaped secret found by its length, not a needle
_AWS_ID_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "APKA")


class TextView:
    """What the pre-checks ask of one text, each worked out once, when first asked, with C-speed
    string methods: a regex pass costs ~10 ns a character, ``in`` and ``split`` a tenth of that."""

    __slots__ = ("_digits", "_long", "_numberish", "low", "text")

    def __init__(self, text: str) -> None:
        self.text, self.low = text, text.lower()
        self._digits: int | None = None
        self._numberish: bool | None = None
        self._long: list[str] | None = None

    @property
    def digits(self) -> int:
        if self._digits is None:
            data = self.text.encode("utf-8", "surrogatepass")
            self._digits = len(data) - len(data.translate(None, _DIGIT_BYTES))
        return self._digits

    @property
    def has_upper(self) -> bool:
        return self.low != self.text

    @property
    def numberish(self) -> bool:
        if self._numberish is None:
            self._numberish = _NUMBERISH.search(self.text) is not None
        return self._numberish

    def long_words(self, length: int) -> str:
        """Its words (split on white space) of at least ``length`` characters, joined: every key
        and token is one such word, and most prose has none."""
        if len(self.text) < length:
            return ""
        if self._long is None:
            words = self.text.split()
            # max(map(len)) runs in C: the list is only built when a word is long enough
            longest = max(map(len, words), default=0)
            self._long = [w for w in words if len(w) >= MIN_WORD] if longest >= MIN_WORD else []
        return " ".join(w for w in self._long if len(w) >= length) if self._long else ""


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of secret. ``apply`` runs only when ``wanted`` says the text may hold one."""

    kind: str
    pattern: re.Pattern[str] | None
    needles: tuple[str, ...] = ()  # one must occur (in ``text.lower()`` when ``lower``)
    lower: bool = False
    # > 0: the secret is one word (no white space) of at least this length, and the needles
    # are looked for in such words only (``TextView.long_words``), a much shorter text.
    min_word: int = 0
    min_digits: int = 0
    upper: bool = False  # written with capital letters: a text without any cannot hold one
    numeric: bool = False  # digits and separators only: needs a ``numberish`` stretch
    also: tuple[str, ...] = ()  # and one of these must occur too (checked first: the cheaper test)
    valid: Callable[[str], bool] | None = None  # applied to the "s" group (or the whole match)
    find: Callable[[str], list[tuple[int, int]]] | None = None  # spans to replace, instead of ``pattern``
    # A Hyperscan pattern (over UTF-8 bytes) found in every text where this detector finds
    # anything: a tighter pre-check than the needles, for ``prefilter.Prefilter`` to ask instead.
    sign: bytes | None = None
    origin: str = ""  # the maintained library whose patterns these are ("" for our own rules)

    @property
    def group(self) -> str:
        """The gate it shares with others: "word" (one long word), "number", "text" (needles), or none."""
        if self.min_word:
            return "word"
        if self.numeric:
            return "number"
        return "text" if self.needles else ""

    def wanted(self, view: TextView) -> bool:
        if (self.upper and not view.has_upper) or (self.min_digits and view.digits < self.min_digits):
            return False
        if self.numeric and not view.numberish:
            return False
        if self.also and not any(n in view.text for n in self.also):
            return False
        if self.min_word:
            haystack = view.long_words(self.min_word)
            if not haystack:
                return False
        else:
            haystack = view.low if self.lower else view.text
        return not self.needles or any(n in haystack for n in self.needles)

    def apply(self, text: str) -> str:
        if self.find is not None:
            for start, end in reversed(_merged(self.find(text))):
                text = f"{text[:start]}{marker(self.kind)}{text[end:]}"
            return text
        assert self.pattern is not None
        return self.pattern.sub(self._replace, text)

    def _replace(self, m: re.Match[str]) -> str:
        group = "s" if "s" in m.re.groupindex else 0
        secret = m.group(group)
        if not secret or secret.startswith("[REDACTED:") or (self.valid is not None and not self.valid(secret)):
            return m.group(0)
        whole, start = m.group(0), m.start(group) - m.start()
        return f"{whole[:start]}{marker(self.kind)}{whole[start + len(secret) :]}"


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans in order, overlapping ones joined (``password: token=x`` finds two)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


# --- validators ------------------------------------------------------------------------------
def _opaque_token(token: str) -> bool:
    """A bearer credential, not a word: digits or symbols in it, or longer than prose words."""
    return len(token) >= 16 or any(not ch.isalpha() for ch in token)


def _basic_credentials(token: str) -> bool:
    try:
        decoded = base64.b64decode(token, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in decoded and decoded.isprintable()


def _aws_secret(token: str) -> bool:
    # Exactly 40 base64 characters of mixed case and digits; a SHA-1 hex digest has one case only.
    return (
        len(token) == 40
        and any(c.isupper() for c in token)
        and any(c.islower() for c in token)
        and any(c.isdigit() for c in token)
    )


# A secret access key has no prefix, and 40 base64 characters are as often a hash or an id:
# one is taken for a key only beside what names it (AWS, a secret) or its access key id.
# (An id found already is a marker: "[REDACTED:key]" names it as well.)
_AWS_WINDOW = 64
_AWS_SECRET = re.compile(r"[A-Za-z0-9/+]{40,}+")
_AWS_WORDS = ("aws", "amazon", "secret", "redacted:key")
_AWS_CONTEXT = re.compile(rf"(?i:aws|amazon|secret|redacted:key)|(?:{'|'.join(_AWS_ID_PREFIXES)})[0-9A-Z]{{16}}")


def _find_aws_secrets(text: str) -> list[tuple[int, int]]:
    low = text.lower()
    if not any(w in low for w in _AWS_WORDS) and not any(p in text for p in _AWS_ID_PREFIXES):
        return []  # nothing names a key anywhere (the C-speed test spares the scan of most texts)
    found = []
    for m in _AWS_SECRET.finditer(text):
        start, end = m.span()
        if not _aws_secret(m.group(0)):
            continue
        if _AWS_CONTEXT.search(text, max(0, start - _AWS_WINDOW), start) or _AWS_CONTEXT.search(
            text[end : end + _AWS_WINDOW]
        ):
            found.append((start, end))
    return found


def _mixed_or_hex(token: str) -> bool:
    """A random token, not a name: lowercase hex (Databricks), or letters of both cases (npm,
    Hugging Face: an identifier this long is written in one case, or with underscores)."""
    if token.startswith("dapi"):
        return True
    body = token.split("_", 1)[-1]
    return any(c.isupper() for c in body) and any(c.islower() for c in body)


def _ssn(token: str) -> bool:
    digits = token.replace("-", "").replace(" ", "")
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


# --- finders for numbers whose separators and length vary -------------------------------------
# Spaces a number is written with besides the ASCII one: no-break, figure and narrow no-break.
_SPACES = "\u00a0\u2007\u202f"
_SPACE_BYTES = rb"\xc2\xa0|\xe2\x80[\x87\xaf]"  # the same, as UTF-8 (what a sign reads)
# 13 or more digits, each pair joined by at most two separators: a card number in any grouping,
# separators mixed. (Possessive: a long number is scanned once, never backtracked into.)
_DIGIT_RUN = re.compile(rf"\d(?:[ \t.\-/{_SPACES}]{{0,2}}+\d){{12,}}+")
_DIGIT_GROUP = re.compile(r"\d+")
_WORD_CHAR = re.compile(r"[^\W\d]|_")  # a letter (digits are in the run already)
# The card networks' issuer prefixes (IIN) and lengths: Visa, Mastercard, Amex, Diners, JCB,
# Discover / UnionPay / Maestro. Luhn alone passes one random number in ten; with the prefix
# and length, ids and nanosecond timestamps (which start with 1) are left alone.
_CARD_NETWORKS = (
    (re.compile(r"4"), (13, 16, 19)),
    (re.compile(r"5[1-5]|2(?:2[2-9]|[3-6]|7[01]|720)"), (16,)),
    (re.compile(r"3[47]"), (15,)),
    (re.compile(r"3(?:0[0-5]|[689])"), (14, 15, 16, 17, 18, 19)),
    (re.compile(r"35(?:2[89]|[3-8])"), (16, 17, 18, 19)),
    (re.compile(r"6|5[06-9]"), (13, 14, 15, 16, 17, 18, 19)),
)


def _card_number(digits: str) -> bool:
    n = len(digits)
    return any(p.match(digits) and n in lengths for p, lengths in _CARD_NETWORKS) and luhn.is_valid(digits)


def _find_cards(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for run in _DIGIT_RUN.finditer(text):
        if run.start() > 1 and text[run.start() - 1] in ".," and text[run.start() - 2].isdigit():
            continue  # the decimals of a number
        if _WORD_CHAR.match(text, run.end()) or (run.start() and _WORD_CHAR.match(text, run.start() - 1)):
            continue  # digits inside a word: a hex id or a UUID, never a card
        groups = [(m.start(), m.end()) for m in _DIGIT_GROUP.finditer(run.group(0))]
        i = 0
        while i < len(groups):
            hit = _card_from(run.group(0), groups, i)
            if hit is None:
                i += 1
                continue
            found.append((run.start() + groups[i][0], run.start() + groups[hit][1]))
            i = hit + 1
    return found


def _card_from(run: str, groups: list[tuple[int, int]], first: int) -> int | None:
    """The last group index of a valid card number starting at group ``first``, or None.

    A card is written whole, or in groups of 4 to 6 digits (4-4-4-4, 4-6-5) that a short one may
    end; one that starts with 4: digits grouped otherwise (1.384.872-1.777, the numbers of an SVG
    path) are not a card's. A whole one is not the decimals of a number (3.2409699419045226)."""
    digits = ""
    for last in range(first, len(groups)):
        start, end = groups[last]
        if last > first and not (4 <= groups[last - 1][1] - groups[last - 1][0] <= 6):
            return None  # the group before this one is not a card's
        if last == first + 1 and groups[first][1] - groups[first][0] != 4:
            return None
        digits += run[start:end]
        if len(digits) > 19:
            return None
        if len(digits) >= 13 and _card_number(digits):
            if (
                last == first
                and (
                    (start and run[start - 1] in ".,")  # (.4906619460083532: JavaScript drops the 0)
                    or (run.startswith((".", ","), end) and run[end + 1 : end + 2].isdigit())
                )
            ):
                return None  # the decimals of a number, or its integer part
            return last
    return None


# ISO 13616 writes IBANs in capitals, and people in either case: the checksum (of the capitals) decides.
# The boundary is checked after the first letter (a lookbehind): a pattern that starts with a
# character class lets the scan skip to candidates.
# It is found from its check digits, the two letters before them checked behind: a pattern that
# starts with a digit lets the scan skip to digits (prose is nearly all letters).
_IBAN = re.compile(r"\d(?<=[A-Za-z]{2}\d)(?<![A-Za-z0-9][A-Za-z]{2}\d)\d(?: ?[A-Za-z0-9]){11,30}+")


def _find_ibans(text: str) -> list[tuple[int, int]]:
    found = []
    for m in _IBAN.finditer(text):
        start = m.start() - 2
        # The pattern may run into the next word: try the longest prefix first.
        chars = [(ch, start + i + 1) for i, ch in enumerate(text[start : m.end()]) if ch != " "]
        for n in range(len(chars), 14, -1):
            if iban.is_valid("".join(ch for ch, _ in chars[:n]).upper()):
                found.append((start, chars[n - 1][1]))
                break
    return found


# A number written without a country code is read as a national number of these regions, in
# turn: a US one (its area code never starts with 0), then a UK one (its trunk prefix is 0).
_PHONE_REGIONS = ("US", "GB")
# Ranges Ofcom keeps for fiction and examples, which libphonenumber deems no one's number: a
# number written in one stands for a real one (UK national numbers, after the trunk prefix).
_FICTION_RANGES = ("7700900", "1632960", "8081570", "9098790", "3069990")
# What a written phone number looks like: an optional +country code, an optional (area code),
# then digit groups joined by single separators; or + and 8 to 15 digits in a row. Only these
# candidates are given to libphonenumber (its own matcher costs ~250 µs per KB of text).
_PHONE = re.compile(
    r"(?<![\w+\-%])(?<![^A-Za-z]\.)(?:\+\d{1,3}[ .\-\u00a0]?)?(?:\(\d{1,4}\)[ .\-\u00a0]?)?\d{1,8}+(?:[ .\-\u00a0]\d{1,8}+){1,5}+(?![\w\-]|\.\d)"
    r"|(?<![\w+\-%])(?<![^A-Za-z]\.)\+?\d{10,15}+(?![\w\-]|\.\d)"
)
_DECIMAL = re.compile(r"[+\-]?\d+\.\d+")
_PHONE_WORD = re.compile(r"(?i:phone|tel\b|call|mobile|cell|fax|sms|whatsapp|dial)")
_PHONE_WINDOW = 32
_DATE = re.compile(r"\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}\b|\d{1,2}[\-/.]\d{1,2}[\-/.]\d{4}\b")


# Nine or more characters a card, phone number or SSN is written with: a fast scan (~10 µs
# per KB) that leaves the precise patterns only these stretches to search. (Hex ids and
# hashes are full of digits, but not of nine of these in a row.)
_NUMBERISH = re.compile(rf"[+(\d][\d+() \t.\-/{_SPACES}]{{8,}}+")


def _in_numberish(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    for island in _NUMBERISH.finditer(text):
        # pos keeps the lookbehinds seeing the text before; endpos + 2 the lookaheads after.
        yield from pattern.finditer(text, island.start(), island.end() + 2)


# A UK National Insurance number: two letters (never D, F, I, Q, U, V; O not second; some pairs
# never issued), six digits, a letter A to D; spaced or not, in one case. It has no check digit.
_NI_NUMBER = re.compile(
    r"(?<![A-Za-z0-9])(?!(?i:BG|GB|KN|NK|NT|TN|ZZ))(?i:[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z])"
    r"(?P<sep>[ \-]?)\d{2}(?P=sep)\d{2}(?P=sep)\d{2}(?P=sep)(?i:[A-D])(?![A-Za-z0-9])"
)


# Its digits and last letter, found first: a pattern that starts with a digit lets the scan skip
# to digits (one that starts with a letter is tried at nearly every character of prose).
_NI_TAIL = re.compile(r"\d\d(?P<sep>[ \-]?)\d\d(?P=sep)\d\d(?P=sep)[A-Da-d](?![A-Za-z0-9])")


def _find_ni_numbers(text: str) -> list[tuple[int, int]]:
    found = []
    for tail in _NI_TAIL.finditer(text):
        start = tail.start() - 2 - len(tail.group("sep"))
        m = _NI_NUMBER.match(text, start) if start >= 0 else None
        if m is not None and m.end() == tail.end():
            letters = m.group(0)[:2] + m.group(0)[-1]
            if letters.isupper() or letters.islower():
                found.append(m.span())
    return found


_SSN = re.compile(r"\b\d{3}(?P<sep>[- ])\d{2}(?P=sep)\d{4}\b(?!-)")


# Nine digits in a row are an SSN only beside a word that names one (as often they are an id).
_SSN_WORD = re.compile(r"(?i:\bssn|\bsocial[ \t_\-]*security)")
_SSN_BARE = re.compile(r"(?<![\w+\-.])\d{9}(?![\w\-]|\.\d)")
_SSN_WINDOW = 40


def _find_ssns(text: str) -> list[tuple[int, int]]:
    found = [m.span() for m in _in_numberish(_SSN, text) if _ssn(m.group(0))]
    low = text.lower()
    if ("ssn" in low or "social" in low) and _SSN_WORD.search(text):
        found += [
            m.span()
            for m in _SSN_BARE.finditer(text)
            if _ssn(m.group(0)) and _SSN_WORD.search(text, max(0, m.start() - _SSN_WINDOW), m.start())
        ]
    return found


def _find_phones(text: str) -> list[tuple[int, int]]:
    found = []
    for m in _in_numberish(_PHONE, text):
        candidate = m.group(0).replace("\u00a0", " ")
        if candidate.startswith("00") and not candidate.startswith("000"):
            candidate = f"+{candidate[2:].lstrip(' .-')}"  # 00: the international prefix outside North America
        if _DECIMAL.fullmatch(candidate):
            continue  # a number's decimals (Decimal('+35236450.6')), which no phone number is written with
        digits = sum(ch.isdigit() for ch in candidate)
        # Without a country code, ten digits at least: seven are too many other things.
        if digits < (8 if candidate.startswith("+") else 10) or digits > 15 or _DATE.match(candidate):
            continue
        # Digits alone, written without a + or a separator, are as often an id, a count or a
        # timestamp (38% of ten-digit ids are valid US numbers): a phone number only beside a word saying so.
        if (
            candidate.isdigit()
            and not m.group(0).startswith("+")
            and not _PHONE_WORD.search(text, max(0, m.start() - _PHONE_WINDOW), m.start())
        ):
            continue
        if any(_phone_number(candidate, region) for region in _PHONE_REGIONS):
            found.append(m.span())
    return found


def _phone_number(candidate: str, region: str) -> bool:
    try:
        number = phonenumbers.parse(candidate, region)
    except phonenumbers.NumberParseException:
        return False
    if phonenumbers.is_valid_number(number):
        return True
    return number.country_code == 44 and str(number.national_number).startswith(_FICTION_RANGES)


# An address in any script (RFC 6531: internationalized local parts and domains). ``\w`` leaves
# out combining marks (Devanagari's vowel signs, Arabic's harakat) and the zero-width joiners:
# any character outside ASCII counts, but white space and the punctuation of the Latin-1,
# General Punctuation, CJK and full-width blocks (a sentence's marks around an address). Each is
# one negated class, so the scan skips to candidates in C; a local part starts where its run does
# (the lookbehind), so a long word without '@' is read once.
_NOT_MAIL = (
    r"\x00-\x24\x26-\x2a\x2c\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\xbf\s\u2000-\u200b\u200e-\u206f\u3000-\u303f\uff00-\uff20"
)
_LOCAL, _LABEL = f"[^{_NOT_MAIL}]", f"[^{_NOT_MAIL}.%+]"
_EMAIL = re.compile(rf"{_LOCAL}(?<!{_LOCAL}.){_LOCAL}*+@(?P<domain>{_LABEL}++(?:\.{_LABEL}++)*\.{_LABEL}{{2,}})")
# Names a mail domain may end in though no public suffix list has them: RFC 2606 / 6761 special
# uses, and what companies' internal mail uses.
_PRIVATE_TLDS = frozenset({"example", "test", "invalid", "localhost", "local", "internal", "lan", "corp", "home"})
# Code, not mail: ``x@self.weights`` (matrix products), ``a@cls.table``.
_CODE_OBJECTS = frozenset({"self", "cls", "this"})


@lru_cache(maxsize=1)
def _public_suffixes() -> PublicSuffixList:
    return PublicSuffixList()  # the Public Suffix List as the package ships it (read once: ~30 ms)


@lru_cache(maxsize=4096)
def _mail_domain(domain: str) -> bool:
    """Whether ``domain`` can be a mail domain: it ends in a real top-level domain (the Public Suffix
    List's, or a private one), and is not an object's attribute (``self.weights``)."""
    labels = domain.lower().split(".")
    if labels[0] in _CODE_OBJECTS:
        return False
    tld = labels[-1]
    if tld in _PRIVATE_TLDS:
        return True
    try:
        tld = tld.encode("idna").decode() if not tld.isascii() else tld
    except UnicodeError:
        return False
    return _public_suffixes().publicsuffix(tld, accept_unknown=False) is not None


def _find_emails(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _EMAIL.finditer(text) if _mail_domain(m.group("domain"))]


# IP addresses, v4 and v6, as the standard library's ``ipaddress`` reads them. An address that
# names no one is kept: loopback, unspecified, link-local (169.254.169.254), multicast and reserved
# (255.255.255.0 is a netmask; IPv6 outside 2000::/3 and fc00::/7 is reserved, which spares
# slices like ``x[1::2]``). Four numbers after a version's mark (v, ==, version) are a version.
_IPV4 = r"(?:\d{1,3}\.){3}\d{1,3}"
# (Each starts with a character class, the boundary checked after it: the scan skips to candidates.
# A v6 address is looked for only where its sign, a colon between hex digits and a colon, is.)
_IPV4_ADDRESS = re.compile(r"\d(?<![\w.\-]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w\-]|\.\d|/\d)")
_IPV6_SIGN = re.compile(r":[0-9A-Fa-f]{0,4}:")
_IPV6_ADDRESS = re.compile(
    rf"[0-9A-Fa-f:](?<![\w.:\-][0-9A-Fa-f:])(?:(?<=:)|[0-9A-Fa-f]{{0,3}}:)"
    rf"(?:[0-9A-Fa-f]{{0,4}}:){{1,6}}(?:{_IPV4}|[0-9A-Fa-f]{{0,4}})(?![\w\-:]|\.\d|/\d)"  # (/32: a network)
)
_VERSION_MARK = re.compile(
    r"(?:(?i:version|\bver\.?|release|build)[_ \t:=\"']{0,6}|(?:==|>=|<=|~=|!=)[ \t\"']{0,2}|(?<![A-Za-z])[vV])$"
)


def _find_ip_addresses(text: str) -> list[tuple[int, int]]:
    found = []
    candidates = _IPV4_ADDRESS.finditer(text)
    if _IPV6_SIGN.search(text):
        candidates = itertools.chain(candidates, _IPV6_ADDRESS.finditer(text))
    for m in candidates:
        try:
            address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(m.group(0))
        except ValueError:
            continue
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # ::ffff:203.0.113.5, as a dual-stack server logs a v4 client
        if (
            address.is_loopback
            or address.is_unspecified
            or address.is_link_local
            or address.is_multicast
            or address.is_reserved
            or _VERSION_MARK.search(text, max(0, m.start() - 16), m.start())
        ):
            continue
        found.append(m.span())
    return found


# --- the detectors, in the order they run (a longer secret first: a PEM block holds base64 that
# other patterns would cut; a card number before a phone number that its digits could look like)
_KEY_CHARS = r"[A-Za-z0-9_\-]"
# ``\d`` in a detector's pattern as a sign (``Detector.sign``) writes it: an ASCII digit, or the
# UTF-8 bytes of another character (some are Unicode digits, which ``\d`` matches in a str).
_D = rb"(?:[0-9]|[\x80-\xff]{2,4})"
_AWS_NAMES = rb"(?i:aws|amazon|secret|redacted:key|%s)" % b"|".join(p.encode() for p in _AWS_ID_PREFIXES)
# (a window of 256 bytes: the 64 characters on each side, in UTF-8)
_AWS_SECRET_SIGN = rb"%s[\x00-\xff]{0,256}[A-Za-z0-9/+]{40}|[A-Za-z0-9/+]{40}[\x00-\xff]{0,256}%s" % (
    _AWS_NAMES,
    _AWS_NAMES,
)
_NI_NUMBER_SIGN = rb"[A-Za-z]{2}[ \-]?%s{2}[ \-]?%s{2}[ \-]?%s{2}[ \-]?[A-Da-d]" % (_D, _D, _D)

DETECTORS: tuple[Detector, ...] = (
    Detector(
        "private_key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.IGNORECASE,
        ),
        ("-----begin",),
        lower=True,
    ),
    Detector(
        "url_credentials",
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,15}://(?P<s>[^\s/?#@:\"'<>]*:[^\s/?#@\"'<>]+)@"),
        ("://",),
    ),
    Detector(
        "webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+"),
        ("hooks.slack.com",),
        min_word=MIN_WORD,
    ),
    Detector(
        "jwt",
        re.compile(rf"(?<![A-Za-z0-9_\-])eyJ{_KEY_CHARS}{{8,}}\.{_KEY_CHARS}{{8,}}\.{_KEY_CHARS}*"),
        ("eyJ",),
        min_word=20,
    ),
    Detector(
        "key",
        re.compile(
            rf"(?<![A-Za-z0-9_\-])(?:sk|pk|rk)-{_KEY_CHARS}{{16,}}"  # Anthropic sk-ant-…, OpenAI sk-proj-…
            r"|(?<![A-Za-z0-9])(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{16,}"  # Stripe
            rf"|AIza{_KEY_CHARS}{{35}}|ya29\.{_KEY_CHARS}{{20,}}|GOCSPX-{_KEY_CHARS}{{20,}}"  # Google
            rf"|(?<![A-Z0-9])(?:{'|'.join(_AWS_ID_PREFIXES)})[0-9A-Z]{{16}}(?![A-Z0-9])"  # AWS access key ids
        ),
        ("sk-", "pk-", "rk-", "_live_", "_test_", "whsec_", "AIza", "ya29.", "GOCSPX-", *_AWS_ID_PREFIXES),
        min_word=19,
    ),
    Detector(
        "token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"  # GitHub
            r"|(?<![A-Za-z0-9])(?:xox[abposr]|xapp)-[A-Za-z0-9\-]{10,}"  # Slack
        ),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "xapp-"),
        min_word=MIN_WORD,
    ),
    # Formats no maintained set covers (detect-secrets reads npm tokens only in an .npmrc line):
    Detector(
        "token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{34}|dapi[a-f0-9]{32}(?:-\d)?)(?![A-Za-z0-9])"
        ),
        ("npm_", "hf_", "dapi"),
        min_word=36,
        valid=_mixed_or_hex,
    ),
    # An AWS STS session token: base64 of a serialized credential, whose first bytes spell the
    # same field names (``origin_ec…``, ``er/aws``) whatever the token.
    Detector(
        "token",
        re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{2}o(?:Jb3JpZ2luX2Vj|GZXIvYXdz)[A-Za-z0-9+/]{60,}+={0,2}"),
        ("oJb3JpZ2luX2Vj", "oGZXIvYXdz"),
        min_word=76,
    ),
    Detector(
        "token",
        re.compile(r"(?i:\bbearer)\s+(?P<s>[A-Za-z0-9._~+/\-]{8,}=*)"),
        ("bearer",),
        lower=True,
        valid=_opaque_token,
    ),
    Detector(
        "credentials",
        re.compile(r"(?i:\bbasic)\s+(?P<s>[A-Za-z0-9+/]{8,}={0,2})"),
        ("basic",),
        lower=True,
        valid=_basic_credentials,
    ),
    # key=value secrets in free text: which keys count, and the needles, are the key rule's call (set by the policy).
    Detector("secret", None, lower=True, also=(":", "=")),
    Detector(
        "email",
        None,
        ("@",),
        find=_find_emails,
        sign=rb"(?:[A-Za-z0-9._%%+\-]|[\x80-\xff])@(?:[A-Za-z0-9_\-]|[\x80-\xff])+(?:\.(?:[A-Za-z0-9_\-]|[\x80-\xff])+)*\.(?:[A-Za-z0-9\-]|[\x80-\xff]){2}",
    ),
    Detector(
        "key",
        None,
        min_word=MIN_AWS_SECRET,
        min_digits=1,
        find=_find_aws_secrets,  # an AWS secret access key: a whole run of exactly 40, named nearby
        sign=_AWS_SECRET_SIGN,
    ),
    Detector(
        "card",
        None,
        min_digits=13,
        numeric=True,
        find=_find_cards,
        sign=rb"%s(?:(?:[ \t.\-/]|%s){0,2}%s){12}" % (_D, _SPACE_BYTES, _D),
    ),
    Detector("iban", None, min_digits=6, find=_find_ibans, sign=rb"[A-Za-z]{2}%s{2}" % _D),
    Detector("ni_number", None, min_digits=6, find=_find_ni_numbers, sign=_NI_NUMBER_SIGN),
    Detector(
        "ssn",
        None,
        min_digits=9,
        numeric=True,
        find=_find_ssns,
        # (a window of 160 bytes: the 40 characters before the digits, in UTF-8)
        sign=rb"%s{3}[- ]%s{2}[- ]%s{4}|(?i:ssn|social[ \t_\-]*security)[\x00-\xff]{0,160}%s{9}" % (_D, _D, _D, _D),
    ),
    Detector(
        "ip_address",
        None,
        min_digits=1,
        also=(".", ":"),
        find=_find_ip_addresses,
        # (an address outside the reserved ::/8 starts with a group and a colon, and has another:
        # 2001:db8:: and fe80::1 alike; one that starts with :: is a v4 one, found by its quad)
        sign=rb"%s{1,3}\.%s{1,3}\.%s{1,3}\.%s{1,3}|[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{0,4}:" % (_D, _D, _D, _D),
    ),
    # A candidate starts where no word, '+', '-', '%' or a '.' but a word's precedes, with 9 numberish characters at least.
    Detector(
        "phone",
        None,
        min_digits=8,
        numeric=True,
        find=_find_phones,
        sign=rb"(?:^|[^A-Za-z0-9_.+\-]|[^0-9]\.)(?:[+(0-9]|%s)(?:[0-9+() \t.\-/]|%s){8}" % (_D, _D),
    ),
)
