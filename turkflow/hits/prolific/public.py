"""Where Prolific sends participants: the one check of a public URL before anything points at it.

Everything turkflow publishes on Prolific sends people to one of our pages (an onboarding quiz, a turn
study's page) or has Prolific post to one (the webhook), so each is checked here before it is created:
an ``https`` URL whose host is not on this machine or a private network (a name is resolved, an address is
checked as it is), refused in one line naming the URL. Whether the address answers from this machine is a
separate, slower look (``unanswered``), which the command-line shows as a warning: a firewall can let
Prolific's participants in and keep this machine out, so silence is not a refusal.

A rehearsal (``turkflow prolific rehearse``) runs the fake Prolific on this machine and the lab's web
process on a loopback port, which this check refuses by design. ``TURKFLOW_PROLIFIC_REHEARSAL_HOST`` names a
host the check takes as public without resolving it, and it is honoured only while
``TURKFLOW_PROLIFIC_BASE_URL`` is itself on this machine (the fake): pointed at Prolific, a rehearsal host
is refused like any other address that does not resolve to a public one.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Optional
from urllib.parse import urlsplit

import requests

from turkflow.errors import InvalidInput

PROBE_SECONDS = 3.0  # how long the look from this machine waits for an answer


def check(url: str, *, what: str, rehearsal_host: str = "", prolific_base_url: str = "") -> str:
    """``url`` if Prolific may send participants to it (or post to it): https, and a host that is neither
    this machine nor a private, link-local or otherwise non-public address. Refused in one line naming the
    URL and ``what`` points at it. ``rehearsal_host`` is trusted only while ``prolific_base_url`` is on this
    machine."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise InvalidInput(f"{what} would point at {url}, which is not an https address; set "
                           "TURKFLOW_PUBLIC_URL to the https address participants' browsers reach")
    host = parts.hostname
    if rehearsal_host and host == rehearsal_host.lower() and on_this_machine(prolific_base_url):
        return url
    problem = _not_public(host)
    if problem:
        raise InvalidInput(f"{what} would point at {url}, whose host {problem}: participants could never reach "
                           "it; set TURKFLOW_PUBLIC_URL to the public https address of the web process")
    return url


def unanswered(url: str, *, rehearsal_host: str = "", prolific_base_url: str = "",
               timeout: float = PROBE_SECONDS) -> Optional[str]:
    """Why ``url`` does not answer from this machine (None: it answers, with any HTTP status), after at most
    about ``timeout`` seconds; a rehearsal host is not asked."""
    host = urlsplit(url).hostname or ""
    if rehearsal_host and host == rehearsal_host.lower() and on_this_machine(prolific_base_url):
        return None
    try:
        requests.head(url, timeout=timeout, allow_redirects=False)
    except requests.RequestException as exc:
        return type(exc).__name__
    return None


def on_this_machine(url: str) -> bool:
    """Whether ``url``'s host is a loopback address (a name is resolved)."""
    host = urlsplit(url).hostname
    if not host:
        return False
    addresses = _addresses(host)
    return bool(addresses) and all(address.is_loopback for address in addresses)


def _not_public(host: str) -> str:
    """Why ``host`` is not a public address ("" when it is)."""
    addresses = _addresses(host)
    if not addresses:
        return "does not resolve to an address"
    for address in addresses:
        if address.is_loopback:
            return f"is this machine ({address})"
        if address.is_link_local:
            return f"is a link-local address ({address})"
        if address.is_private:
            return f"is a private address ({address})"
        if not address.is_global:
            return f"is not a public address ({address})"
    return ""


def _addresses(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """``host`` as an address, or every address its name resolves to (none: it does not resolve)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return []
    return [ipaddress.ip_address(entry[4][0].split("%")[0]) for entry in found]
