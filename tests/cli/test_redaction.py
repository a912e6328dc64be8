"""Issue 22: every URL with credentials is shown redacted, parseable or not, on every path.

A password holding ``/`` (``redis://:s3cret/with:odd@chars@host``) made a standard parser see no
password at all, so the error printed it whole; redis-py's reason then quoted a piece of it back
("as 's3cret'"). The rule (:mod:`baton.bus.redact`) is a pure function, checked here over many
URL shapes, plus each command that opens a bus, in-process, with such a URL.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from baton.bus.redact import HIDDEN, redact_text, redact_url, url_secrets
from baton.cli.app import app

SECRET = "s3cret"

# (url as given, as shown): every password in these is made of SECRET, so the table also checks
# that no form of it survives.
SHAPES = [
    # parseable, the password where a parser finds it
    ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
    ("redis://user:s3cret@host/0", "redis://user:***@host/0"),
    (
        "rediss://user:s3cret@host:6380/0?ssl_ca_certs=/ca.pem",
        "rediss://user:***@host:6380/0?ssl_ca_certs=/ca.pem",
    ),
    ("unix://:s3cret@/tmp/redis.sock?db=0", "unix://:***@/tmp/redis.sock?db=0"),
    ("REDIS://:s3cret@HOST/0", "REDIS://:***@HOST/0"),
    ("redis://user:@host/0", "redis://user:***@host/0"),  # an empty password is still one
    ("redis://user:s3cret%40x@host/0", "redis://user:***@host/0"),  # percent-encoded
    ("redis://u:s3cret@ss3cret@host:6379/0", "redis://u:***@host:6379/0"),  # '@' in it
    ("redis://:s3cret s3cret@host/0", "redis://:***@host/0"),  # a space in it
    ("redis://:s3cret@h1,:s3cret2@h2/0", "redis://:***@h2/0"),  # several hosts
    ("http://user:s3cret@localhost:8080/v1", "http://user:***@localhost:8080/v1"),
    ("s3://key:s3cret@bucket/prefix", "s3://key:***@bucket/prefix"),
    # credentials in the query
    ("redis://host/0?password=s3cret", "redis://host/0?password=***"),
    ("redis://host/0?db=1&Password=s3cret&x=1", "redis://host/0?db=1&Password=***&x=1"),
    (
        "http://127.0.0.1:8321/sessions/s-1?token=s3cret",
        "http://127.0.0.1:8321/sessions/s-1?token=***",
    ),
    ("redis://:s3cret@host/0?password=s3cret", "redis://:***@host/0?password=***"),
    # what a parser misreads: the password holds a delimiter nobody percent-encoded
    ("redis://:s3cret/with:odd@chars@host", "redis://:***@host"),
    ("redis://:s3cret/with:odd@chars@host:6379/0", "redis://:***@host:6379/0"),
    ("redis://:s3cret#frag@host/0", "redis://:***@host/0"),
    ("redis://:s3cret?q@host/0", "redis://:***@host/0"),
    ("redis://user:s3cret/x@host/0?password=s3cret", "redis://user:***@host/0?password=***"),
    # what no parser accepts, or what is barely a URL
    ("redis://:s3cret@[::1/0", "redis://:***@[::1/0"),
    ("redis://user:s3cret@host:notaport/0", "redis://user:***@host:notaport/0"),
    (":s3cret@host", ":***@host"),
    ("redis//:s3cret@host", "redis//:***@host"),
    ("redis:/:s3cret@host", "redis:***@host"),
    ("password=s3cret", "password=***"),
]
CLEAN = [
    "redis://host:6379/0",
    "redis://user@host/0",  # a user name alone is no secret
    "memory://",
    "http://host/users/a@b.com",  # an '@' in a path, no password before it
    "rediss://host/0?ssl_ca_certs=/etc/ca.pem",
    "not a url",
    "",
]


@pytest.mark.parametrize(("url", "shown"), SHAPES)
def test_credentials_are_hidden(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert SECRET not in shown
    assert redact_url(shown) == shown  # redacting again changes nothing
    if SECRET in url:
        assert url_secrets(url), "a URL with a password names what it hides"


@pytest.mark.parametrize("url", CLEAN)
def test_urls_without_credentials_are_left_alone(url: str) -> None:
    assert redact_url(url) == url
    assert url_secrets(url) == []


@pytest.mark.parametrize(("url", "shown"), [(u, s) for u, s in SHAPES if SECRET in u])
def test_a_reason_that_quotes_the_url_or_a_piece_of_it_is_redacted(url: str, shown: str) -> None:
    """What a parser or a server says about the URL is shown with its secrets hidden too."""
    for reason in (
        f"cannot parse {url!r}",
        f"Port could not be cast to integer value as '{SECRET}'",
        f"bad password {SECRET}, try again",
    ):
        said = redact_text(reason, url)
        assert SECRET not in said, said
    assert redact_text(f"at {url}", url) == f"at {shown}"
    assert redact_text("Error 111 connecting to host:6379.", url) == (
        "Error 111 connecting to host:6379."
    )


def test_hidden_pieces_are_whole_words_only() -> None:
    url = "redis://:s3cret/with:odd@chars@host"
    said = redact_text("the odd ones: oddity with 's3cret'", url)
    assert said == f"the {HIDDEN} ones: oddity {HIDDEN} '{HIDDEN}'"


URL = "redis://:s3cret/with:odd@chars@host"
COMMANDS = {
    "sessions": ["sessions"],
    "post": ["post", "--session", "s1", "--to", "lead", "hi"],
    "watch": ["watch", "s1"],
    "approve": ["approve", "s1", "call_1", "--yes"],
    "clean": ["clean"],
    "cancel": ["cancel", "s1"],
    "resume": ["resume", "s1"],
    "worker": ["worker", "--check"],
    "run": ["run", "--no-local-workers", "paint a fox"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_no_command_prints_the_password_of_a_url_it_cannot_parse(name: str) -> None:
    result = CliRunner().invoke(app, [*COMMANDS[name], "--bus", URL])
    assert result.exit_code == 2, result.output
    said = result.stderr
    assert SECRET not in said and "odd@chars" not in said and "with:" not in said, said
    assert said.count("\n") == 1 and said.startswith(f"baton {name}: "), said
    assert "redis://:***@host" in said  # the URL is still named, so the user can find it
