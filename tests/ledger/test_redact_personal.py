"""Personal data by its form, and precision on code: IP addresses (a policy setting), UK phone
numbers in national format, bare SSNs beside their name, e-mail local parts in any script;
and lines of code that name a secret without holding one are left as they are.

The corpus kinds themselves (each in five contexts) are ``tests/ledger/test_redact.py``'s;
here: the IP policy both ways (constructor and environment), what each new rule must leave
alone, and the labelled code lines of ``tests/redaction_corpus.code_lines``.
"""

from __future__ import annotations

import difflib

import pytest

from ledger import redact
from ledger.redact import Redactor
from ledger.settings import redaction_settings
from tests.redaction_corpus import CONTEXTS, IP_ADDRESSES, SECRETS, code_lines


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch):
    """``default_policy()`` built afresh from the environment the test sets."""
    redact._configured.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    redact._configured.cache_clear()


@pytest.mark.parametrize("ip_addresses", [True, False])
def test_the_ip_policy_replaces_addresses_or_keeps_them_and_nothing_else_changes(ip_addresses):
    policy, others = Redactor(ip_addresses=ip_addresses), [s for s in SECRETS if s.kind != "ip_address"]
    for secret in IP_ADDRESSES:
        for context in CONTEXTS:
            text = context.format(secret.text)
            out = policy.text(text)
            if ip_addresses:
                assert not [n for n in secret.needles if n in out] and "[REDACTED:ip_address]" in out, out
            else:
                assert out == text
    for secret in others:  # every other kind is redacted alike either way
        assert policy.text(secret.text) == Redactor().text(secret.text)


@pytest.mark.parametrize(("mode", "kept"), [(None, False), ("on", False), ("OFF", True)])
def test_the_environment_sets_the_ip_policy_on_by_default(configured, mode, kept):
    if mode is None:
        configured.delenv("TURNLEDGER_REDACT_IP", raising=False)
    else:
        configured.setenv("TURNLEDGER_REDACT_IP", mode)
    text = "client 203.0.113.42 sent dana@example.org"
    expected = (
        "client 203.0.113.42 sent [REDACTED:email]" if kept else "client [REDACTED:ip_address] sent [REDACTED:email]"
    )
    assert redact.default_policy().text(text) == expected
    assert redact.redact_text(text) == expected  # the explicit policy follows the same setting


def test_a_wrong_ip_setting_is_refused_naming_the_choices(configured):
    configured.setenv("TURNLEDGER_REDACT_IP", "public")
    with pytest.raises(ValueError, match=r"TURNLEDGER_REDACT_IP='public': choose one of on, off"):
        redaction_settings()  # what serve checks before it starts


@pytest.mark.parametrize(
    "kept",
    [
        "listen on 127.0.0.1:8080", "bind 0.0.0.0", "::1", "metadata at 169.254.169.254", "fe80::1%eth0",
        "netmask 255.255.255.0", "mdns 224.0.0.251", "route 10.0.0.0/8 via gw", "net 2001:db8::/32",
        "version 1.2.3.4", "v1.2.3.4", "pip install pkg==1.2.3.4", '__version__ = "0.5.1.2"',
        "oid 1.3.6.1.4.1.311", "x[1::2]", "std::vector<int>", "a::b", "2026-12-07 10:00:00.123",
        "1.2.3.4.5",
    ],
)  # fmt: skip
def test_addresses_that_name_no_one_and_versions_are_kept(kept):
    assert Redactor().text(kept) == kept


def test_an_ip_address_is_replaced_wherever_it_is_written():
    policy = Redactor()
    assert policy.text("ssh root@203.0.113.5") == "ssh root@[REDACTED:ip_address]"
    assert policy.text("via 198.51.100.7, release to 192.0.2.1") == (
        "via [REDACTED:ip_address], release to [REDACTED:ip_address]"
    )
    assert policy.text("[2001:db8::7]:443") == "[[REDACTED:ip_address]]:443"
    assert policy.text("net 2001:db8:: end") == "net [REDACTED:ip_address] end"  # the pre-check's sign sees it too
    assert policy.text("peer ::ffff:10.1.2.3") == "peer [REDACTED:ip_address]"  # a v4 client, as dual-stack logs it


@pytest.mark.parametrize(
    "kept",
    [
        "order 123456789 shipped", "ssn 000123456", "SSN 666123456", "ssn 123450000", "the ssn field, id 1234567890",
        "Decimal('+35236450.6')", "020 7946", "version 07700",
    ],
)  # fmt: skip
def test_digits_are_an_ssn_or_uk_number_only_when_they_can_be_one(kept):
    assert Redactor().text(kept) == kept


def test_a_local_part_keeps_its_marks():
    """Devanagari's vowel signs are combining marks, which ``\\w`` leaves out: the whole address goes."""
    assert Redactor().text("मोहन.लाल@example.in, ok") == "[REDACTED:email], ok"


@pytest.mark.parametrize(
    "code",
    [
        "self.token = nextchar", "token = self[0]", "TOKEN_ENDS = TSPECIALS | WSP", "ERRORTOKEN = token.ERRORTOKEN",
        "self.user, self.password = user, password", "# token          = 1*tchar", 'sig = "from %d to %d" % (a, b)',
        "SERVER_AUTH = '1.3.6.1.5.5.7.3.1'", "auth_header = 'Proxy-Authorization'", "'Cookie': 'http.cookies',",
        "'MODULE_PWD_STATE': 'yes',", "cookie_str = ', '.join(co)", 'auth = "Basic " + b64encode(raw)',
        "util.debug('token=%r', token)", 'raise TypeError("pwd: expected bytes, got %s" % t)',
        "- password:     The password for the authentication.", 'print("shlex: token=EOF")',
    ],
)  # fmt: skip
def test_code_that_names_a_secret_without_holding_one_is_kept(code):
    assert Redactor().text(code) == code


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("password = Tr0ub4dor3x", "Tr0ub4dor3x"), ("token = aB3dE5gH7jK9", "aB3dE5gH7jK9"),
        ("password=hunter2", "hunter2"), ("api_key: s3cr3tValue", "s3cr3tValue"), ('password = "hunter22"', "hunter22"),
        ("(password=Tr0ub4dor)", "Tr0ub4dor"), ("token=abcd&next=1", "abcd"), ("pin: 1234", "1234"),
        ("password=Password123", "Password123"), ("secret: 'MySecret2024'", "MySecret2024"),
    ],
)  # fmt: skip
def test_a_secret_written_like_code_is_still_one(text, secret):
    assert secret not in Redactor().text(text)


def _lost(before: str, after: str) -> int:
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return len(before) - sum(m.size for m in matcher.get_matching_blocks())


def test_labelled_code_lines_without_a_secret_are_kept_and_those_with_personal_data_are_not():
    non_secret, held = code_lines()
    assert len(non_secret) >= 1_000 and len(held) >= 50
    policy = Redactor()
    altered = [(line, out) for line in non_secret if (out := policy.text(line)) != line]
    assert len(altered) <= 0.005 * len(non_secret), altered
    assert sum(_lost(a, b) for a, b in altered) <= 0.005 * sum(map(len, non_secret))
    assert sum(policy.text(line) != line for line in held) >= 0.5 * len(held)  # the search can see them
