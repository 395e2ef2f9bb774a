"""The redaction corpus: secrets and personal data of every kind the policy covers, and ordinary text.

``SECRETS``: what is sent (``text``, with the context a secret is written in: a header,
``key=value``, a connection string) and what must never be stored (``needles``: the
secret itself, and for numbers written with separators their bare digits too). All are
made up; checksummed ones (cards, IBANs) are the networks' and banks' published test
numbers or pass their checksum. ``ORDINARY``: 440 KB of code and prose with no secret
(CPython modules under the PSF License, turnledger's own docs), which the policy must
leave at least 99% intact. Shared by ``tests/server/test_redaction_corpus.py`` and
``benchmarks/redaction.py``.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import importlib.util
import ipaddress
import random
import re
import struct
import sysconfig
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from email import errors, headerregistry
from functools import cache
from http import cookies
from pathlib import Path

__all__ = [
    "CONTEXTS", "ID_TYPES", "IP_ADDRESSES", "ORDINARY_FILE", "PIECE", "SECRETS", "Secret", "code_lines", "message_pieces",
    "ordinary_by_type",
    "ordinary_text",
]  # fmt: skip

ORDINARY_FILE = Path(__file__).parent / "data" / "ordinary_text.txt.gz"


@dataclass(frozen=True)
class Secret:
    kind: str  # the marker it leaves: [REDACTED:kind]
    text: str  # as sent
    needles: tuple[str, ...]  # none of these may be stored
    name: str = ""  # what it is (a provider's format, a national number); several share a marker kind


def _s(kind: str, text: str, *needles: str, name: str = "") -> Secret:
    return Secret(kind, text, needles or (text,), name)


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _number(kind: str, text: str, name: str = "") -> Secret:
    return Secret(kind, text, (text, _digits(text)), name)


_AZURE_SLASH_KEY = (
    "JQbSYgQ0rSFXjVUJXml/Ut8WegFpVxL2fKsc3kvLlwzw3am9VjUrfYy5Ahj0gTETKciZ3YsJ7gvN2yFbiG60U=="  # after a "/"
)
# AWS STS session tokens: base64 of a serialized credential, which starts with the same bytes in every token
_AWS_SESSION_1 = (
    "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDH4hzQVQNzajdOZ0JC8tKG5cAA+cRHLbH4hsttdTuhTij0Cb7p3C0tVi"
    "/LHb8uYYQaHDA/V5gW4TIVtb3AiezCK8u9T9bdlAggCn9CPSzMe5wGh92iu0jWO/qHCE1MLclvyh4kzryUX0a4t0HVhCmXNnQyArsg+yy34q"
)
_AWS_SESSION_2 = (
    "FwoGZXIvYXdzEBYaDyL/crZXvuY5brqBTm1T2w6jeuIVEdlCskCn1qMzvNqGTyMec5LlALICpJZjwW//5ziAuDVLGeODdHn1HM/vaKLs1XdQ4S"
    "xafCBW1K19G2wX5NjhtxF/tuMp0QcogpBWDv52cG7BjfTYGRTPYlNlGY7yFTVRXVhT0r1vA2gvkyNgTmUiA3HklTuGAui1SurfcFkr1mTRnUjM"
)
_AWS_SESSION_3 = (
    "IQoJb3JpZ2luX2VjEIv6L8ZLr3h6tKmqWsZzs9n2KphiA4aisoe7D1vpscduy8Xi9ABSfYE0QWwr/Q5BQVcS7ma3P82+/RBKmvFCIvxJt1/zTvz"
    "oIQKEuE4/PHqaySDXH7ap/uvMR9VCP4oNnolEwKC/7wtJirN4H64b5j5XJpowsQBICBgkpgyn0rrmyVRUQaGwc=="
)
_AZURE_ACCOUNT_KEY = "Ab3+Cd5/Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7Ab3Cd5E=="
_PEM_RSA_LINE = "MIIEowIBAAKCAQEA7ZqQm3v9Lk2Xw8Yt5Rp1Nc4Hb6Jd0Fg3Ae8Tu2Wx4Yz6Vb9Nm1Qr3St5Uv7"
_PEM_SSH_LINE = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
_PEM_EC_LINE = "MHcCAQEEIBv4Zq7Lm2Np5Rt8Wx1Yc4Hd6Jf0Kg3Ms9Qu2Vw5Xz8OAoGCCqGSM49AwEHoUQDQgAE"

SECRETS: tuple[Secret, ...] = (
    # provider API keys
    _s("key", "sk-ant-api03-Qm7Zp2Xw9Lk4Rt8Yv1Bn6Hc3Jd5Fg0Ae-_Tu2Wx4Yz"),
    _s("key", "sk-ant-admin01-Hj4Kl6Mn8Pq0Rs2Tu4Vw6Xy8Za0Bc2De"),
    _s("key", "sk-proj-Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7"),
    _s("key", "sk-svcacct-Zy9Xw7Vu5Ts3Rq1Po9Nm7Lk5Ji3Hg1"),
    _s("key", "sk-1234567890abcdefABCDEF1234567890abcdef12"),
    _s("key", "AIzaSyD4rT6yU8iO0pA2sD4fG6hJ8kL0zX2cV4b"),
    _s("key", "ya29.a0AfH6SMBx3Ld9Qw2Er5Ty8Ui1Op4As7Df0Gh"),
    _s("key", "GOCSPX-Lm3Nb5Vc7Xz9As1Df3Gh5Jk7"),
    _s(
        "key",
        f"DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={_AZURE_ACCOUNT_KEY};EndpointSuffix=core.windows.net",
        _AZURE_ACCOUNT_KEY,
    ),
    _s("key", "api-key: 3f9a0c1b2d4e5f60718293a4b5c6d7e8", "3f9a0c1b2d4e5f60718293a4b5c6d7e8"),  # Azure OpenAI
    _s(
        "key",
        "https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&sig=Xy7%2BAb3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr%3D",
        "Xy7%2BAb3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr%3D",
    ),
    # AWS
    _s("key", "AKIAIOSFODNN7EXAMPLE"),
    _s("key", "ASIAY34FZKBOKMUTVV7A"),
    _s(
        "key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    # (40 base64 characters alone are as often a hash: a secret access key is one beside what names it)
    _s("key", "AWS: Lq8+Zr3/Tb6nWm1pVx4cYh7kJd0sGf2aEu9iOo5R", "Lq8+Zr3/Tb6nWm1pVx4cYh7kJd0sGf2aEu9iOo5R"),
    _s(
        "key",
        "AKIAIOSFODNN7EXAMPLE Tb6nWm1pVx4cYh7kJd0sGf2aEu9iOo5RLq8+Zr3/",
        "Tb6nWm1pVx4cYh7kJd0sGf2aEu9iOo5RLq8+Zr3/",
    ),
    _s(
        "key",
        'AWS_SECRET_ACCESS_KEY="Hk2/Mn4+Pq6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2Hi4Jk"',
        "Hk2/Mn4+Pq6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2Hi4Jk",
    ),
    # GitHub, every prefix
    _s("token", "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1eF3hJ5"),
    _s("token", "gho_Zy8Xw6Vu4Ts2Rq0Po8Nm6Lk4Ji2Hg0Fe8Dc6"),
    _s("token", "ghu_Mn4Bv6Cx8Zl0Kj2Hg4Fd6Sa8Qw0Er2Ty4Ui6"),
    _s("token", "ghs_Pq7Rs9Tu1Vw3Xy5Za7Bc9De1Fg3Hi5Jk7Lm9"),
    _s("token", "ghr_Wx2Yz4Ab6Cd8Ef0Gh2Ij4Kl6Mn8Op0Qr2St4"),
    _s("token", "github_pat_11ABCDEFG0aBcDeFgHiJkLmN_oPqRsTuVwXyZ0123456789abcdefghijKLMNOP"),
    # Slack, every prefix, and a webhook
    _s("token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    _s("token", "xoxp-234567890123-2345678901234-BcDeFgHiJkLmNoPqRsTuVwXy"),
    _s("token", "xoxa-2-345678901234-3456789012345-CdEfGhIjKlMn"),
    _s("token", "xoxr-456789012345-DeFgHiJkLmNoPqRs"),
    _s("token", "xoxs-567890123456-EfGhIjKlMnOpQrSt"),
    _s("token", "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef"),
    _s("webhook", "https://hooks.slack.com/services/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"),
    # Stripe
    _s("key", "sk_live_51HqLyjWDarjtT1zdp7dcXbDfK3Lm9Np"),
    _s("key", "rk_live_62IrMzkXEbskuU2aeq8edYcEgL4Mn0Oq"),
    _s("key", "sk_test_73JsNalYFctlvV3bfr9feZdFhM5No1Pr"),
    _s("key", "whsec_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv"),
    # JWTs
    _s(
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
    _s("jwt", "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJhY21lIiwiZXhwIjoxNzkwMDAwMDAwfQ.MEUCIQDx7Zq-Lm2Np5Rt8Wx1Yc4Hd6Jf0"),
    # bearer and basic credentials, any case
    _s("token", "Authorization: Bearer Zt7Yq2Wp9Xn4Lm6Kj8Hg", "Zt7Yq2Wp9Xn4Lm6Kj8Hg"),
    _s("token", "BeArEr mF3kL9pQ2rS7tV1wX5yZ8aB4", "mF3kL9pQ2rS7tV1wX5yZ8aB4"),
    _s(
        "token",
        "curl -H 'authorization: bearer opaque.Token-0123456789' https://api.example.com",
        "opaque.Token-0123456789",
    ),
    _s("credentials", "Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
    _s("credentials", "BASIC dXNlcjpQQHNzdzByZCE=", "dXNlcjpQQHNzdzByZCE="),
    # PEM private keys
    _s(
        "private_key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_RSA_LINE}\nKx9Lm2Np5Rt8Wx1Yc4Hd6Jf0Kg3Ms9Qu2Vw5Xz8\n-----END RSA PRIVATE KEY-----",
        _PEM_RSA_LINE,
    ),
    _s(
        "private_key",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{_PEM_SSH_LINE}\n-----END OPENSSH PRIVATE KEY-----",
        _PEM_SSH_LINE,
    ),
    _s("private_key", f"-----BEGIN EC PRIVATE KEY-----\n{_PEM_EC_LINE}\n-----END EC PRIVATE KEY-----", _PEM_EC_LINE),
    # credentials in URLs
    _s("url_credentials", "postgres://admin:Pg-S3cr3t-Pass@db.internal:5432/prod", "Pg-S3cr3t-Pass"),
    _s("url_credentials", "https://deploy:gh-Deploy-Key-77x@git.example.com/repo.git", "gh-Deploy-Key-77x"),
    _s("url_credentials", "redis://:R3dis-P4ss-word@cache:6379/0", "R3dis-P4ss-word"),
    # key=value secrets in free text
    _s("secret", "password=Tr0ub4dor-3x", "Tr0ub4dor-3x"),
    _s("secret", "db_password: s3cr3t-DB-pass", "s3cr3t-DB-pass"),
    _s("secret", '{"client_secret": "cs-8f7e6d5c4b3a"}', "cs-8f7e6d5c4b3a"),
    _s("secret", "passphrase=correct-horse-battery-staple-42", "correct-horse-battery-staple-42"),
    _s("secret", "export DATABASE_PASSWORD='Qw3rty!Uiop'", "Qw3rty!Uiop"),
    _s("secret", "cookie: session=4f9c2e7a1b3d5f7e9a0c2e4f", "4f9c2e7a1b3d5f7e9a0c2e4f"),
    _s("secret", "x-api-key=ak_live_9f8e7d6c5b4a3210", "ak_live_9f8e7d6c5b4a3210"),
    _s("secret", "SSN: 536228741", "536228741"),
    # emails, one JSON-escaped in the text itself
    _s("email", "dana.scully@example.org"),
    _s("email", "fox.mulder+xfiles@fbi.example.gov"),
    _s("email", "walter_skinner@sub.example.co.uk"),
    _s("email", "JOHN.DOGGETT@EXAMPLE.NET"),
    _s("email", "monica.reyes\\u0040example.com", "monica.reyes", "monica.reyes\\u0040example.com"),
    # payment cards (Luhn-valid), any grouping and separators
    _number("card", "4111 1111 1111 1111"),
    _number("card", "5500-0000-0000-0004"),
    _number("card", "3782 822463 10005"),
    _number("card", "6011000990139424"),
    _number("card", "4012 8888-8888 1881"),
    _number("card", "3056 9309 0259 04"),
    _number("card", "4222.2222.2222.2"),
    # IBANs (ISO 7064 mod 97 valid)
    Secret("iban", "DE89 3704 0044 0532 0130 00", ("DE89 3704 0044 0532 0130 00", "DE89370400440532013000")),
    _s("iban", "GB82WEST12345698765432"),
    Secret(
        "iban",
        "FR14 2004 1010 0505 0001 3M02 606",
        ("FR14 2004 1010 0505 0001 3M02 606", "FR1420041010050500013M02606"),
    ),
    _s("iban", "NL91ABNA0417164300"),
    # phone numbers
    _number("phone", "+1 415-555-2671"),
    _number("phone", "(212) 555-0199"),
    _number("phone", "+44 20 7946 0958"),
    _number("phone", "+49 30 901820"),
    _number("phone", "650.253.0000"),
    # US SSNs
    _number("ssn", "078-05-1120"),
    _number("ssn", "219 09 9999"),
    # --- formats detect-secrets' plugins find (ledger/redact/plugins.py), each written three ways at least
    _s("token", "glpat-_rZv0LlM1wre8DzuPHhq", name="gitlab_pat"),
    _s(
        "token",
        "PRIVATE-TOKEN: glpat-_gc3ac5Bdlvjuwzk9ph_3cpE9U",
        "glpat-_gc3ac5Bdlvjuwzk9ph_3cpE9U",
        name="gitlab_pat",
    ),
    _s(
        "token",
        "gitlab: glpat-LobTnvPsGhseSEAdpjFd5VO2hqRVM4 (rotated)",
        "glpat-LobTnvPsGhseSEAdpjFd5VO2hqRVM4",
        name="gitlab_pat",
    ),
    _s("token", "gldt-k3FBrccP82MD4Au3ycQYLIv7", name="gitlab_deploy_token"),
    _s(
        "token",
        "deploy with gldt-LobTnvPsGhseSEAdpjFd5VO2",
        "gldt-LobTnvPsGhseSEAdpjFd5VO2",
        name="gitlab_deploy_token",
    ),
    _s(
        "token",
        '{"runner": "glrt-LobTnvPsGhseSEAdpjFd5VO2hqRVM4"}',
        "glrt-LobTnvPsGhseSEAdpjFd5VO2hqRVM4",
        name="gitlab_runner_token",
    ),
    _s("key", "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", name="sendgrid"),
    _s(
        "key",
        "sendgrid: 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",
        "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",
        name="sendgrid",
    ),
    _s(
        "key",
        "mail via https://api.sendgrid.com/v3?k=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",
        "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",
        name="sendgrid",
    ),
    _s("key", "SK945068d354e1dec539d349425c2ccefa", name="twilio_api_key"),
    _s(
        "key",
        "twilio key SKbd552dafbfa71c41302cbd9f55b6b77d in use",
        "SKbd552dafbfa71c41302cbd9f55b6b77d",
        name="twilio_api_key",
    ),
    _s(
        "key",
        '{"sid": "SK5314a4353eb8b6768d47b535c5539471"}',
        "SK5314a4353eb8b6768d47b535c5539471",
        name="twilio_api_key",
    ),
    _s("key", "AC5314a4353eb8b6768d47b535c5539471", name="twilio_account_sid"),
    _s(
        "key",
        "account AC945068d354e1dec539d349425c2ccefa",
        "AC945068d354e1dec539d349425c2ccefa",
        name="twilio_account_sid",
    ),
    _s(
        "key",
        "https://api.twilio.com/2010-04-01/Accounts/ACbd552dafbfa71c41302cbd9f55b6b77d/Messages.json",
        "ACbd552dafbfa71c41302cbd9f55b6b77d",
        name="twilio_account_sid",
    ),
    _s(
        "token",
        "//registry.npmjs.org/:_authToken=npm_p1S1FbhqcfltmOggfEL0XgBDwDHFkwjLYpch",
        "npm_p1S1FbhqcfltmOggfEL0XgBDwDHFkwjLYpch",
        name="npm_token",
    ),
    _s(
        "key",
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=/{_AZURE_SLASH_KEY};EndpointSuffix=core.windows.net",
        f"/{_AZURE_SLASH_KEY}",
        _AZURE_SLASH_KEY,
        name="azure_storage_key",
    ),
    _s("key", f"AccountKey={_AZURE_ACCOUNT_KEY[:86]}==", _AZURE_ACCOUNT_KEY[:86], name="azure_storage_key"),
    # --- formats no library covers (our own rules), three ways at least
    _s("token", "npm_LqVUj5bspLWSdPNmCmWlT0pquIlp1TehcRjo", name="npm_token"),
    _s(
        "token",
        "publish with npm_7igt8K9AydaG8yuohDOqJPlbisCzfx6eeGwe today",
        "npm_7igt8K9AydaG8yuohDOqJPlbisCzfx6eeGwe",
        name="npm_token",
    ),
    _s("token", "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", name="huggingface_token"),
    _s(
        "token",
        "huggingface-cli login --token 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",
        "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",
        name="huggingface_token",
    ),
    _s(
        "token",
        '{"hub": "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"}',
        "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",
        name="huggingface_token",
    ),
    _s("token", "dapi7b19e27ea4345c886f4160e2abfc190f", name="databricks_token"),
    _s(
        "token",
        "databricks: dapicf5354cf2fc40dc5a0e1b4f878e5b49a-2",
        "dapicf5354cf2fc40dc5a0e1b4f878e5b49a",
        name="databricks_token",
    ),
    _s(
        "token",
        "curl -H 'X-Databricks: dapi6d17a9018f9bb488cc24f6c3097bbcd4' https://adb-1.azuredatabricks.net",
        "dapi6d17a9018f9bb488cc24f6c3097bbcd4",
        name="databricks_token",
    ),
    _s("token", _AWS_SESSION_1, name="aws_session_token"),
    _s("token", f"X-Amz-Security-Token: {_AWS_SESSION_2}", _AWS_SESSION_2, name="aws_session_token"),
    _s("token", f"session {_AWS_SESSION_3} expires at noon", _AWS_SESSION_3, name="aws_session_token"),
    _s("ni_number", "AB 12 34 56 C", "AB 12 34 56 C", "AB123456C", name="uk_ni_number"),
    _s("ni_number", "ce123456d", name="uk_ni_number"),
    _s("ni_number", "NI number JG-10-37-25-A on file", "JG-10-37-25-A", "JG103725A", name="uk_ni_number"),
    Secret(
        "iban", "de89 3704 0044 0532 0130 00", ("de89 3704 0044 0532 0130 00", "de89370400440532013000"), "iban_lower"
    ),
    _s("iban", "gb82west12345698765432", name="iban_lower"),
    _s("iban", "pay to nl91abna0417164300 by friday", "nl91abna0417164300", name="iban_lower"),
    _number("card", "4111\u00a01111\u00a01111\u00a01111", name="card_nbsp"),
    _number("card", "5500  0000  0000  0004", name="card_double_space"),
    _number("card", "3782\u202f822463\u202f10005", name="card_narrow_nbsp"),
    _number("card", "card: 6011 \u00a00009 9013 9424", name="card_mixed_spaces"),
    _s("email", "josé.garcía@exämple.de", name="email_idn"),
    _s("email", "用户@例子.中国", name="email_idn"),
    _s("email", "write to δοκιμή@παράδειγμα.ελ soon", "δοκιμή@παράδειγμα.ελ", name="email_idn"),
    _s("email", "müller@xn--bcher-kva.de", name="email_idn"),
    _number("phone", "0044 20 7946 0958", name="phone_00"),
    _number("phone", "call 0049 30 901820 now", name="phone_00"),
    _number("phone", "00 1 415 555 2671", name="phone_00"),
    _s("secret", "password=/Hunter2Hunter2", "/Hunter2Hunter2", "Hunter2Hunter2", name="secret_slash"),
    _s("secret", "secret: /xK9-mP2-qR7-tV4", "/xK9-mP2-qR7-tV4", "xK9-mP2-qR7-tV4", name="secret_slash"),
    _s("secret", '{"api_key": "/abc/Def123Ghi456"}', "/abc/Def123Ghi456", "abc/Def123Ghi456", name="secret_slash"),
    # --- e-mail local parts in a script outside Latin (combining marks, joiners), domains IDN or not
    _s("email", "उदाहरण@example.com", "उदाहरण@example.com", "उदाहरण", name="email_non_latin"),
    _s("email", "write to मोहन.लाल@उदाहरण.भारत today", "मोहन.लाल@उदाहरण.भारत", "मोहन.लाल", name="email_non_latin"),
    _s("email", "иван.петров@пример.рф", "иван.петров@пример.рф", "иван.петров", name="email_non_latin"),
    _s("email", "(مُحَمَّد.عَلِي@example.com)", "مُحَمَّد.عَلِي@example.com", "مُحَمَّد.عَلِي", name="email_non_latin"),
    _s("email", "連絡先：すずき.はなこ@例え.jp。", "すずき.はなこ@例え.jp", "すずき.はなこ", name="email_non_latin"),
    _s("email", "Γράψτε στο ελένη.παπαδοπούλου@example.gr", "ελένη.παπαδοπούλου", name="email_non_latin"),
    _s("email", "می‌خواهم@example.ir", "می‌خواهم@example.ir", "می‌خواهم", name="email_non_latin"),
    # --- UK phone numbers in national format, and with 00 44 (Ofcom's ranges for fiction)
    _number("phone", "020 7946 0958", name="phone_uk"),
    _number("phone", "call me on 07700 900123", name="phone_uk"),
    _number("phone", "(020) 7946 0958", name="phone_uk"),
    _number("phone", "0161 496 0000", name="phone_uk"),
    _number("phone", "01632 960 018", name="phone_uk"),
    _number("phone", "00 44 20 7946 0958", name="phone_uk"),
    _number("phone", "mobile: 00 44 7700 900456", name="phone_uk"),
    _number("phone", "0044 (0)20 7946 0123", name="phone_uk"),
    # --- US SSNs written without separators, beside a word that names them
    _s("ssn", "SSN 536228742", "536228742", name="ssn_bare"),
    _s("ssn", "social security number: 219099998", "219099998", name="ssn_bare"),
    _s("ssn", "my Social Security No. is 573920184, thanks", "573920184", name="ssn_bare"),
    _s("ssn", "ssn#287654321", "287654321", name="ssn_bare"),
    _s("ssn", "Social-Security-Number=401234567", "401234567", name="ssn_bare"),
    # --- IP addresses (personal data: redacted unless TURNLEDGER_REDACT_IP=off)
    _s("ip_address", "client 203.0.113.42 connected", "203.0.113.42", name="ip_address"),
    _s("ip_address", "x-forwarded-for: 198.51.100.7, 10.1.2.3", "198.51.100.7", "10.1.2.3", name="ip_address"),
    _s("ip_address", "http://192.0.2.15:8080/health", "192.0.2.15", name="ip_address"),
    _s("ip_address", "[2001:db8:85a3::8a2e:370:7334]:443", "2001:db8:85a3::8a2e:370:7334", name="ip_address"),
    _s("ip_address", "peer ::ffff:203.0.113.77 closed", "203.0.113.77", name="ip_address"),
)
IP_ADDRESSES = tuple(s for s in SECRETS if s.kind == "ip_address")  # kept when the IP policy is off


@cache
def ordinary_text() -> str:
    return gzip.decompress(ORDINARY_FILE.read_bytes()).decode()


# Modules of the running interpreter's standard library (code, docstrings, RFC text, constants).
_STDLIB_MODULES = (
    "argparse.py", "typing.py", "pathlib.py", "http/client.py", "email/message.py", "email/utils.py",
    "email/_header_value_parser.py", "json/decoder.py", "urllib/parse.py", "smtplib.py", "uuid.py",
    "base64.py", "ssl.py", "subprocess.py", "inspect.py", "tarfile.py", "logging/__init__.py",
    "unittest/case.py", "asyncio/base_events.py", "collections/__init__.py", "configparser.py",
    "statistics.py", "fractions.py", "ipaddress.py", "difflib.py", "datetime.py", "_pydecimal.py",
)  # fmt: skip
_IDS = 4_000  # of each id kind


def _stdlib() -> str:
    root = Path(sysconfig.get_paths()["stdlib"])
    return "\n".join((root / name).read_text(encoding="utf-8") for name in _STDLIB_MODULES if (root / name).is_file())


def _js_bundle() -> str:
    """A slice of a minified JavaScript bundle: plotly.js, as the plotly package ships it."""
    spec = importlib.util.find_spec("plotly")
    assert spec is not None and spec.submodule_search_locations
    bundle = Path(spec.submodule_search_locations[0]) / "package_data" / "plotly.min.js"
    return bundle.read_text(encoding="utf-8")[:400_000]


def _base64_images(rng: random.Random) -> str:
    """PNG images (random pixels), base64-encoded as e-mail writes them (76-character lines) and as data URIs."""
    out = []
    for n in range(24):
        rows = b"".join(b"\x00" + rng.randbytes(40 * 3) for _ in range(50))  # 40 x 50 RGB, filter 0
        header = struct.pack(">IIBBBBB", 40, 50, 8, 2, 0, 0, 0)
        png = (
            b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b"")
        )
        encoded = base64.b64encode(png).decode()
        if n % 2:
            out.append("\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76)))
        else:
            out.append(f'<img src="data:image/png;base64,{encoded}">')
    return "\n".join(out)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _ids(rng: random.Random, make: Callable[[], str]) -> list[str]:
    """Ids written as traces write them: bare, as a field, in JSON, in a sentence."""
    forms = ("{}", "id={}", '{{"id": "{}"}}', "order {} shipped", "ref: {}")
    return [forms[i % len(forms)].format(make()) for i in range(_IDS)]


@cache
def ordinary_by_type() -> dict[str, str]:
    """Text of each kind that holds no secret (one id a line for the id kinds), ≥ 1 MB in all:
    the prose and code of ``ordinary_text``, a slice of the Python standard library and of a
    JavaScript bundle read from this environment, base64 images, UUIDs, git SHAs, 10- and 16-digit ids."""
    rng = random.Random(26)
    return {
        "prose_and_code": ordinary_text(),
        "python_stdlib": _stdlib(),
        "js_bundle": _js_bundle(),
        "base64_images": _base64_images(rng),
        "uuid": "\n".join(_ids(rng, lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)))),
        "git_sha": "\n".join(_ids(rng, lambda: hashlib.sha1(rng.randbytes(8)).hexdigest())),
        "id_10_digits": "\n".join(_ids(rng, lambda: str(rng.randrange(10**9, 10**10)))),
        "id_16_digits": "\n".join(_ids(rng, lambda: str(rng.randrange(10**15, 10**16)))),
    }


# Lines of code that look like they could hold a secret, chosen by a rule of their own (not by
# our detectors): a secret-sounding name before '=' or ':', an '@', seven digits, or a dotted quad.
_HARD_LINE = re.compile(
    r"(?i:pass|pwd|secret|token|key|auth|credential|cookie|session|\bsig|\bssn|\bpin)\w*[\"']?\s*[=:]"
    r"|@|\d[\d ().\-]{5,}\d|\b\d{1,3}(?:\.\d{1,3}){3}\b|[0-9a-f]{0,4}:[0-9a-f]{0,4}:[0-9a-f]{1,4}"
)
# What makes a line hold personal data or a credential by its form, read by the standard library
# (not by our detectors): an address that ``email.headerregistry`` parses with a dotted domain,
# what ``ipaddress`` parses, a Cookie header whose pairs ``http.cookies`` reads.
_MAIL_TOKEN = re.compile(r"[^\s<>()\[\]\"',;:&`]+@[^\s<>()\[\]\"',;:&`]+")
_ADDRESS_TOKEN = re.compile(r"[0-9A-Fa-f:.]{7,}")


_COOKIE_HEADER = re.compile(r"(?i:cookie\d?):[ \t]*(.*)")


def _personal(line: str) -> bool:
    if (header := _COOKIE_HEADER.search(line)) is not None:
        cookie = cookies.SimpleCookie()
        with contextlib.suppress(cookies.CookieError):
            cookie.load(header.group(1).replace("\\r\\n", "; "))
        if cookie:
            return True  # a Cookie header's pairs are credentials, whatever their names
    for token in _MAIL_TOKEN.findall(line):
        try:
            address = headerregistry.Address(addr_spec=token.rstrip("."))
        except (ValueError, IndexError, errors.HeaderParseError):
            continue
        if "." in address.domain and address.domain.rsplit(".", 1)[1].isalpha():
            return True
    for token in _ADDRESS_TOKEN.findall(line):
        try:
            ipaddress.ip_address(token.strip(".:"))
            return True
        except ValueError:
            continue
    return False


_NOT_LIBRARY = frozenset({"test", "tests", "idlelib", "lib2to3", "site-packages", "turtledemo"})


@cache
def code_lines() -> tuple[list[str], list[str]]:
    """(non-secret, held): the distinct lines of the interpreter's standard library (its modules
    and packages, tests left out: ~10 MB) that look like they could hold a secret (``_HARD_LINE``:
    ~2,700), split by the standard library's own reading (``_personal``) into those that hold
    personal data or a credential by its form, which redaction replaces, and the others,
    labelled non-secret (no module of the standard library holds a credential in use)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [*sorted(root.glob("*.py")), *sorted(root.glob("*/*.py"))]
    lines = (
        line
        for f in files
        if _NOT_LIBRARY.isdisjoint(f.relative_to(root).parts)
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines()
    )
    non_secret, held = [], []
    for line in dict.fromkeys(lines):
        if line.strip() and _HARD_LINE.search(line):
            (held if _personal(line) else non_secret).append(line)
    return non_secret, held


ID_TYPES = ("uuid", "git_sha", "id_10_digits", "id_16_digits")  # one id a line, each with its checksum rule
PIECE = 2048  # the size of a message: how text reaches the policy
# Where the corpus's secrets are written when a test or benchmark puts them in a text of its own.
CONTEXTS = ("{}", "note: {} here", "({})", '{{"v": "{}"}}', "line one\n{}\nline three")


def message_pieces(text: str) -> list[str]:
    """``text`` in pieces of about ``PIECE`` characters, each cut after a space or a mark, never
    inside a word or a number (which a message never starts or ends in the middle of)."""
    out, start = [], 0
    while start < len(text):
        end = min(start + PIECE, len(text))
        if end < len(text):
            cut = max(text.rfind(ch, start, end) for ch in " \n;,({")
            end = cut + 1 if cut > start else end
        out.append(text[start:end])
        start = end
    return out
