"""Where a budget webhook may POST: one address policy, checked when a rule is added and at every delivery.

Whoever may add a budget (anyone with the server's token, or with the file) chooses
a URL the collector then POSTs to from inside the network. Unchecked, a webhook is
a request forgery against the cloud metadata service, an admin port or a router.

* **Never**: link-local (169.254.0.0/16, fe80::/10: cloud metadata services listen
  there), metadata addresses outside it (AWS ``fd00:ec2::254``, Alibaba
  ``100.100.100.200``, Azure ``168.63.129.16``), unspecified (0.0.0.0/8, ``::``),
  multicast, reserved and broadcast; the same for an IPv4 address inside an IPv6 one
  (``::ffff:169.254.169.254``, ``::169.254.169.254``, NAT64 ``64:ff9b::``, 6to4, Teredo).
* **Only when the operator allows it**: loopback and private ranges (127/8, ``::1``,
  10/8, 172.16/12, 192.168/16, 100.64/10, ``fc00::/7``, …): ``TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS=1``
  or ``turnledger serve --allow-private-webhooks``; ``turnledger up`` allows them by
  default, for its local use.
* A host name is resolved **once**; every address it resolves to must pass, and the
  connection goes to a checked address (:func:`connect_pinned`), never to a second
  lookup a rebinding DNS server could answer differently. The ``Host`` header, the
  TLS server name and the certificate check stay with the name.

Numeric hosts go through the resolver too, so ``0x7f.1`` or ``2130706433`` are
judged as the address they really are.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ledger.settings import ALLOW_PRIVATE_WEBHOOKS, allow_private_webhooks

from .rules import BudgetError, WebhookTarget

__all__ = [
    "CheckedTarget",
    "ForbiddenTarget",
    "TargetPolicy",
    "UnresolvedTarget",
    "check_new_targets",
    "check_url",
    "connect_pinned",
    "refusal",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., Sequence[tuple[Any, ...]]]  # socket.getaddrinfo's shape
Watch = Callable[[socket.socket], None]

# Metadata services outside the link-local ranges (169.254.169.254 itself is link-local):
# AWS IMDS over IPv6, Alibaba Cloud, Azure's WireServer.
_METADATA = frozenset(ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200", "168.63.129.16"))
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_ALLOW_HINT = f"set {ALLOW_PRIVATE_WEBHOOKS}=1, or run `turnledger serve --allow-private-webhooks`"


class ForbiddenTarget(BudgetError):
    """The webhook's host is (or resolves to) an address the policy refuses; the message says which and why."""


class UnresolvedTarget(BudgetError):
    """The webhook's host name does not resolve (now): nothing can be checked, nothing is sent."""


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """Which webhook addresses are allowed. ``resolver`` is ``socket.getaddrinfo`` (tests give a fake DNS)."""

    allow_private: bool = False
    resolver: Resolver = socket.getaddrinfo

    @classmethod
    def from_settings(cls, *, default: bool = False) -> TargetPolicy:
        """``TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS`` when set, else the command's ``default``."""
        chosen = allow_private_webhooks()
        return cls(allow_private=default if chosen is None else chosen)


@dataclass(frozen=True, slots=True)
class CheckedTarget:
    """A webhook URL whose host resolved to ``addresses``, every one of them allowed."""

    scheme: str
    host: str  # the name as written (lower-cased, IPv6 without brackets): Host header and TLS name
    port: int
    path: str  # path and query, what the request line carries
    addresses: tuple[str, ...]


def _reaches(ip: IPAddress) -> list[IPAddress]:
    """What a connection to ``ip`` reaches: itself, and any IPv4 host an IPv6 form carries."""
    if isinstance(ip, ipaddress.IPv4Address):
        return [ip]
    value = int(ip)
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    # ::a.b.c.d (IPv4-compatible, deprecated but still routed by some stacks) and NAT64 translations
    if (value >> 32 == 0 and value > 1) or any(ip in net for net in _NAT64):
        return [ipaddress.IPv4Address(value & 0xFFFFFFFF)]
    out: list[IPAddress] = [ip]
    if ip.sixtofour is not None:
        out.append(ip.sixtofour)
    out += list(ip.teredo or ())
    return out


def _judge(ip: IPAddress) -> tuple[bool, str] | None:
    """(always refused?, what it is) for one address; None when it is a public address."""
    if ip in _METADATA:
        return True, "a cloud metadata address"
    if ip.is_loopback:
        return False, "a loopback address"
    if ip.is_link_local:
        return True, "a link-local address (where cloud metadata services listen)"
    if ip.is_unspecified or (ip.version == 4 and ip in _THIS_NETWORK):
        return True, "an unspecified address"
    if ip.is_multicast:
        return True, "a multicast address"
    if ip.is_reserved:
        return True, "a reserved address"
    if not ip.is_global:
        return False, "a private address"
    return None


def refusal(ip: IPAddress, policy: TargetPolicy) -> str | None:
    """Why ``ip`` may not receive a webhook under ``policy`` (None: it may)."""
    verdicts = [(reached, *v) for reached in _reaches(ip) if (v := _judge(reached)) is not None]
    verdicts.sort(key=lambda v: not v[1])  # the always-refused first
    if not verdicts or (policy.allow_private and not verdicts[0][1]):
        return None
    reached, always, what = verdicts[0]
    said = f"{ip} is {what}" if reached == ip else f"{ip} reaches {reached}, {what}"
    if always:
        return f"{said}: webhooks are never sent there"
    return f"{said}: private and loopback webhook targets are refused unless allowed ({_ALLOW_HINT})"


def _split(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise BudgetError(f"webhook host {parts.netloc!r} has an invalid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BudgetError(f"webhook url must be an http(s) URL with a host, got scheme {parts.scheme!r}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path


def check_url(url: str, policy: TargetPolicy) -> CheckedTarget:
    """Resolve the URL's host once and check every address; raises :class:`ForbiddenTarget`
    or :class:`UnresolvedTarget`. Messages name the host, never the URL's (secret) path."""
    scheme, host, port, path = _split(url)
    try:
        infos = policy.resolver(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise UnresolvedTarget(f"webhook host {host!r} does not resolve: {exc}") from None
    addresses = tuple(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))
    if not addresses:
        raise UnresolvedTarget(f"webhook host {host!r} resolves to no address")
    for address in addresses:
        why = refusal(ipaddress.ip_address(address), policy)
        if why is not None:
            named = "" if address == host else f" ({host!r} resolves to {address})"
            raise ForbiddenTarget(f"webhook host {host!r} refused{named}: {why}")
    return CheckedTarget(scheme, host, port, path, addresses)


def check_new_targets(targets: Iterable[WebhookTarget], policy: TargetPolicy) -> None:
    """The check when a rule is added. A name that does not resolve yet is accepted:
    delivery resolves and checks again, so it can never reach a refused address."""
    for target in targets:
        with contextlib.suppress(UnresolvedTarget):
            check_url(target.url, policy)


def _open(address: str, port: int, timeout: float | None, watch: Watch | None) -> socket.socket:
    sock = socket.create_connection((address, port), timeout)
    if watch is not None:
        watch(sock)  # the caller's deadline can cut it, the TLS handshake included
    return sock


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to a checked address; the Host header keeps the name."""

    def __init__(self, target: CheckedTarget, address: str, timeout: float, watch: Watch | None) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.address, self.watch = address, watch

    def connect(self) -> None:
        self.sock = _open(self.address, self.port, self.timeout, self.watch)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a checked address; SNI and the certificate check are for the name."""

    def __init__(self, target: CheckedTarget, address: str, timeout: float, watch: Watch | None) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(target.host, target.port, timeout=timeout, context=self.tls)
        self.address, self.watch = address, watch

    def connect(self) -> None:
        sock = _open(self.address, self.port, self.timeout, self.watch)
        try:
            self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


def connect_pinned(target: CheckedTarget, timeout: float, watch: Watch | None = None) -> http.client.HTTPConnection:
    """A connected ``http.client`` connection to the first checked address that answers;
    ``watch`` is given each socket as soon as it is connected."""
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    error: OSError | None = None
    for address in target.addresses:
        conn = kind(target, address, timeout, watch)
        try:
            conn.connect()
            return conn
        except OSError as exc:
            conn.close()
            error = exc
    assert error is not None  # check_url never returns a target without addresses
    raise error
