"""Hiding the credentials of a URL before it is shown: one rule for every message, log line and
error of baton, whatever the URL (a bus, a model endpoint, a media bucket) and whether it parses.

Why a rule of its own: a URL is shown exactly when something is wrong with it, and a wrong URL is
often one no parser splits as its author meant. ``redis://:s3cret/with:odd@chars@host`` (a
password holding ``/`` that was not percent-encoded) parses, to a standard parser, as the host
``:s3cret`` and the path ``/with:odd@chars@host``: no password at all. So a URL is split by the
parser only when that cannot have misplaced a password: when no ``@`` is left outside its
authority. Otherwise the looser rule hides everything from the authority's first ``:`` to the
last ``@``, which over-hides an odd URL (a port and a path before an ``@`` in the path) rather
than ever showing a secret.

A parser's own error message can quote a piece of the URL back (redis-py: "Port could not be cast
to integer value as 's3cret'"), so :func:`redact_text` hides the secrets of a URL inside any text
that speaks of it.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

HIDDEN = "***"

SECRET_PARAMS = frozenset(
    {"password", "passwd", "pwd", "secret", "token", "access_token", "api_key", "apikey"}
)
"""Query parameters whose value is a credential (``?password=`` of redis-py, ``?token=`` of
``baton serve``'s page URLs), matched without regard to case."""

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SECRET_PARAM = re.compile(
    r"(?i)((?<![\w.-])(?:" + "|".join(sorted(SECRET_PARAMS)) + r")=)([^&#;\s]*)"
)
_PIECES = re.compile(r"[:/@?#\[\]&=;,\s]+")


def redact_url(url: str) -> str:
    """``url`` as it may be shown: its password (the user-info after the first ``:``) and the
    values of credential query parameters (:data:`SECRET_PARAMS`) replaced by ``***``; the user
    name, host, port and path stay readable. A URL without credentials comes back unchanged.

    Any string is accepted, URL or not (see the module docstring for the rule that decides how it
    is split)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # no URL parser accepts it (``redis://:PW@[::1/0``)
        return _redact_loose(url)
    if "@" in parts.path + parts.query + parts.fragment:  # the parser may have misplaced one
        return _redact_loose(url)
    netloc, query = parts.netloc, parts.query
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{HIDDEN}@{host}"
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(key.lower() in SECRET_PARAMS for key, _ in pairs):
        safe = [(k, HIDDEN if k.lower() in SECRET_PARAMS else v) for k, v in pairs]
        query = urlencode(safe, safe="*/")  # a file path in the query stays readable
    if (netloc, query) == (parts.netloc, parts.query):
        return _SECRET_PARAM.sub(rf"\1{HIDDEN}", url)  # ``password=`` outside a query, too
    scheme = url.lstrip()[: len(parts.scheme)]  # as written (the parser lower-cases it)
    shown = f"{scheme}://{netloc}{parts.path}"  # by hand: geturl() drops an empty "//"
    return shown + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")


def url_secrets(url: str) -> list[str]:
    """The substrings of ``url`` that :func:`redact_url` hides (the password, credential query
    values), longest first; empty for a URL without credentials."""
    found: list[str] = []
    span = _loose_span(url)
    strict = _strict_password(url)
    if strict:
        found.append(strict)
    elif span is not None:
        found.append(url[span[0] : span[1]])
    found.extend(value for _, value in _SECRET_PARAM.findall(url) if value)
    return sorted({s for s in found if s}, key=len, reverse=True)


def redact_text(text: str, *urls: str) -> str:
    """``text`` (an error message from a parser or a server, say) with the secrets of each of
    ``urls`` hidden wherever they appear in it, percent-decoded too, and each piece of a secret
    between URL delimiters as a whole word: a parser that quotes back one piece of a password it
    misread ("as 's3cret'") shows ``***`` instead. Over-hiding an ordinary word that happens to be
    part of a password costs a reader little; showing the piece would cost the password."""
    for url in urls:
        text = text.replace(url, redact_url(url))
        for secret in url_secrets(url):
            forms = dict.fromkeys((secret, unquote(secret)))
            pieces = {piece for form in forms for piece in _PIECES.split(form)} - {""}
            for form in forms:
                text = text.replace(form, HIDDEN)
            for piece in sorted(pieces, key=len, reverse=True):
                text = re.sub(rf"(?<![\w*]){re.escape(piece)}(?![\w*])", HIDDEN, text)
    return text


def _strict_password(url: str) -> str | None:
    """The password as the parser sees it, when the parser is trusted (see :func:`redact_url`)."""
    try:
        parts = urlsplit(url)
        if "@" in parts.path + parts.query + parts.fragment or parts.password is None:
            return None
    except ValueError:
        return None
    userinfo = parts.netloc.rpartition("@")[0]
    return userinfo.split(":", 1)[1] if ":" in userinfo else None


def _loose_span(text: str) -> tuple[int, int] | None:
    """Where the looser rule's password lies in ``text``: from the first ``:`` after the scheme
    to the last ``@``; None when there is no such ``:``."""
    at = text.rfind("@")
    scheme = _SCHEME.match(text)
    start = scheme.end() if scheme else 0
    colon = text.find(":", start, at) if at > start else -1
    return (colon + 1, at) if colon != -1 else None


def _redact_loose(text: str) -> str:
    """``text`` with the looser rule's password (``:…@``) and credential parameters hidden."""
    span = _loose_span(text)
    if span is not None:
        text = f"{text[: span[0]]}{HIDDEN}{text[span[1] :]}"
    return _SECRET_PARAM.sub(rf"\1{HIDDEN}", text)
