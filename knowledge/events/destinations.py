"""Where a webhook may send: public addresses only, unless an admin named the host.

A webhook URL is an admin's, but the delivery log shows each try's status, so a URL pointing
inside the network would make Brain a port scanner of its own network (and a reader of cloud
metadata at 169.254.169.254). So the host is resolved and every address it resolves to must be
a global one — not loopback, link-local, private, shared (100.64/10), multicast, reserved or
the cloud metadata addresses — when the webhook is registered and again at each delivery (a
name can be pointed elsewhere later), and the delivery connects to the address that was checked,
never to a new lookup. Hosts named in BRAIN_WEBHOOK_ALLOW_HOSTS (an internal receiver, a test's
loopback server) are allowed whatever they resolve to."""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from knowledge.errors import Invalid

# Global by the registry yet used for cloud metadata (AWS's IPv6 endpoint) or not routable.
METADATA = {ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("169.254.169.254")}


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str
    port: int
    address: str  # the checked address the delivery connects to
    path: str


def _refuse(message: str):
    raise Invalid({"url": [message]})


def _allowed_hosts() -> set[str]:
    return {h.strip().lower().strip("[]") for h in settings.BRAIN_WEBHOOK_ALLOW_HOSTS if h.strip()}


def _why_internal(address: str) -> str | None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private or ip.is_reserved or ip.is_multicast or ip.is_unspecified or not ip.is_global:
        return "a private or reserved address"
    return None


def destination_check(url: str) -> Destination:
    """The destination of `url` after the checks above; Invalid (naming the url) otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        _refuse("Use an http or https URL with a host.")
    host = parts.hostname.lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        _refuse("The port is not a number from 1 to 65535.")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        _refuse(f"{host} does not resolve ({exc}).")
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        _refuse(f"{host} does not resolve.")
    if host not in _allowed_hosts():
        for address in addresses:
            why = _why_internal(address)
            if why:
                _refuse(
                    f"{host} resolves to {address}, {why}: webhooks go to public addresses unless "
                    "the host is named in BRAIN_WEBHOOK_ALLOW_HOSTS."
                )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(scheme=parts.scheme, host=host, port=port, address=addresses[0], path=path)
