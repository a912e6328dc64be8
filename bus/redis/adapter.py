"""Everything the Redis bus needs from redis-py beyond its public client API, in one place.

The bus packs commands and reads replies on redis-py's connections itself
(:mod:`baton.bus.redis.batch`: that is what makes automatic pipelining pay), which leans on parts
of redis-py that change between releases: how a pool hands out a connection (``get_connection()``
takes no argument from 5.3 on, 5.2 requires one), how a connection sends packed bytes and reads
one reply, and how an error reply becomes an exception (redis-py strips the code from the message
for the codes it has classes for, and that list grows). No other module touches these, and
``tests/bus/test_redis_adapter.py`` checks this one at the oldest redis-py ``pyproject.toml``
allows (``.ci/redis-floor``) as well as at the installed one.

Replies are decoded as UTF-8 with ``surrogateescape``: a byte that is not UTF-8 never raises here
(see :mod:`baton.bus.utf8` for how the readers refuse it).

Error replies are mapped here, once, from their RESP code (the reply's first word) to typed
exceptions, so callers branch on a type (:class:`NoGroup`, :class:`BusyGroup`, :class:`NoScript`)
and never on a message's wording.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoPermissionError, NoScriptError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from baton.bus.errors import BusError, redact_url
from baton.bus.redact import redact_text, url_secrets
from baton.errors import ConfigError

# What a lost connection raises (a round trip past its deadline raises the built-in TimeoutError,
# an OSError): worth a retry, and the reply to what was sent may be lost.
FAULTS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

# A fault (a subclass of redis-py's ConnectionError) that is really the server turning the
# URL's credentials down: on the first connection it is the URL's fault, not the network's.
CredentialsRefused = AuthenticationError


def tls_refusal(fault: BaseException) -> str | None:
    """Why the TLS handshake behind a connection fault refused the server's certificate (a CA
    file that did not issue it, a host name it was not issued for), or None for any other fault.

    redis-py raises its ``ConnectionError`` with the ``SSLCertVerificationError`` as context; no
    retry can change the answer, so the caller reports it as the configuration error it is.
    """
    seen: BaseException | None = fault
    for _ in range(8):  # a short chain: the fault, redis-py's wrapper, the ssl error
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return str(seen.verify_message or seen.reason or seen)
        seen = seen.__cause__ or seen.__context__
    return None


class RedisRefused(BusError):
    """Redis answered a command with an error reply; ``code`` is the reply's RESP error code.

    The codes the bus branches on have their own subclasses; for other replies ``code`` is the
    reply's first word where redis-py left it in the message, else ``ERR``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"Redis refused the operation: {message}")
        self.code = code
        self.reply = message


class NoScript(RedisRefused):
    """``NOSCRIPT``: the server does not know the script's SHA (it restarted): load it again."""


class NoGroup(RedisRefused):
    """``NOGROUP``: the stream or its consumer group is gone (deleted, or a server came back
    without its data)."""


class BusyGroup(RedisRefused):
    """``BUSYGROUP``: the consumer group exists already."""


class Redirected(RedisRefused):
    """A cluster node does not serve the command's slot: ``MOVED <slot> <host>:<port>`` (for
    good: the map is out of date) or ``ASK`` (this once, the slot is being migrated)."""

    def __init__(self, code: str, message: str, slot: int, address: tuple[str, int]) -> None:
        super().__init__(code, message)
        self.slot = slot
        self.address = address


class Moved(Redirected):
    """``MOVED``: the slot is served by another master now."""


class Ask(Redirected):
    """``ASK``: ask the named node this once (``ASKING`` first): the slot is migrating."""


class ClusterUnsettled(RedisConnectionError):
    """``CLUSTERDOWN``, ``TRYAGAIN`` or ``MASTERDOWN``: the cluster is failing over or moving
    keys; ``LOADING``: a node restarted and still reads its data back. A fault, not a refusal:
    the same command succeeds once the node or the cluster settles, so it is retried with
    backoff like a lost connection (and the slot map read again)."""


_UNSETTLED = frozenset({"CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "LOADING"})

_TYPED: dict[str, type[RedisRefused]] = {
    "NOSCRIPT": NoScript,
    "NOGROUP": NoGroup,
    "BUSYGROUP": BusyGroup,
}

_REDIRECTS: dict[str, type[Redirected]] = {"MOVED": Moved, "ASK": Ask}


def _redirect(kind: type[Redirected], code: str, message: str) -> RedisRefused:
    """``MOVED``/``ASK`` with the slot and address it names; a reply that names none stays a
    plain refusal."""
    words = message.split()
    if words and words[0] == code:
        words = words[1:]  # redis-py leaves the code in the message with its own parser
    try:
        host, _, port = words[1].rpartition(":")
        return kind(code, message, int(words[0]), (host, int(port)))
    except (IndexError, ValueError):
        return RedisRefused(code, message)


def refusal(error: ResponseError) -> RedisRefused:
    """The typed exception for one error reply, as redis-py's parser handed it over."""
    message = str(error)
    code = getattr(error, "status_code", None)  # newer redis-py (7.2 on) keeps the code it strips
    if not isinstance(code, str) or not code:
        if isinstance(error, NoScriptError):  # stripped by every redis-py this supports
            code = "NOSCRIPT"
        elif isinstance(error, NoPermissionError):  # likewise (a pub/sub reply, say)
            code = "NOPERM"
        else:
            first = message.split(" ", 1)[0]
            code = first if first.isalpha() and first.isupper() else "ERR"
    redirect = _REDIRECTS.get(code)
    if redirect is not None:
        return _redirect(redirect, code, message)
    return _TYPED.get(code, RedisRefused)(code, message)


def unsettled(refused: RedisRefused) -> ClusterUnsettled | None:
    """The fault a refusal stands for when the cluster is changing, else None."""
    if refused.code in _UNSETTLED:
        return ClusterUnsettled(f"{refused.code}: {refused.reply}")
    return None


class _Once(Retry):
    """Each command tried once, and a failure raised as it is: the bus retries itself, knowing
    which replies may be lost (:mod:`baton.bus.redis.core`).

    ``Retry(NoBackoff(), 0)`` is not that: redis.asyncio's runs its failure handler before it
    gives up, and the pub/sub one reconnects there (``PubSub._reconnect``). Two commands of one
    pub/sub connection failing together (the reader's and a subscribe's, when the server drops
    it) each made a connection, and the second overwrote the first's without closing it (an
    unclosed ``StreamWriter``, tests/bus/test_cluster.py). redis-py's synchronous ``Retry``,
    which the bus passed before, never ran the handler here, but 8.2 converts it to this class,
    handler and all. A ``call_with_retry`` that is a coroutine function is kept as it is.
    """

    async def call_with_retry(self, do: Callable[[], Awaitable[Any]], *_: Any, **__: Any) -> Any:
        return await do()


def _options(client_name: str, socket_timeout: float | None) -> dict[str, Any]:
    return {
        "decode_responses": True,
        # Anyone can XADD or PUBLISH any bytes. Strict decoding would raise UnicodeDecodeError
        # out of the parser, failing every command of the round trip (and the pub/sub reader);
        # with surrogateescape a byte that is not UTF-8 arrives as a lone surrogate that the
        # readers refuse as a malformed entry (baton.bus.utf8), and packs back to the same byte.
        "encoding_errors": "surrogateescape",
        "protocol": 2,  # the raw replies the bus parses are RESP2-shaped
        "socket_connect_timeout": 2.0,
        "socket_timeout": socket_timeout,
        "retry": _Once(NoBackoff(), 0),
        # Named so an operator (and the connection-economy test) can see whose they are.
        "client_name": client_name,
    }


def _pool(url: str, max_connections: int, options: dict[str, Any]) -> ConnectionPool:
    if urlsplit(url).scheme.lower() == "rediss":
        given = {key for key, _ in parse_qsl(urlsplit(url).query)}
        if not given & {"ssl_check_hostname", "ssl_cert_reqs"}:
            # The certificate must name the host, whatever redis-py's default (off before 6.0,
            # and the floor is 5.3); a URL that relaxes verification itself says so.
            options = {**options, "ssl_check_hostname": True}
    try:
        return ConnectionPool.from_url(url, max_connections=max_connections, **options)
    except ValueError as exc:
        # redis-py's reason can quote a piece of a password it misread (a "port"): hidden too
        hint = (
            "; a password holding '/', '?', '#' or '@' must be percent-encoded (%2F, %3F, %23, %40)"
            if url_secrets(url)
            else ""
        )
        raise ConfigError(
            f"bad Redis URL {redact_url(url)!r}: {redact_text(str(exc), url)}{hint}"
        ) from exc


def pubsub_client(url: str, *, client_name: str) -> Redis:
    """A client with one connection of its own, for pub/sub (public redis-py API from here on).
    Raises ``ConfigError`` for a URL redis-py cannot parse."""
    pool = _pool(url, 1, _options(client_name, socket_timeout=5.0))
    return Redis.from_pool(pool)  # from_pool: closing the client closes the pool


class RawConnection:
    """One of redis-py's connections, used below its client: packed bytes out, raw replies in."""

    __slots__ = ("_connection",)

    def __init__(self, connection: AbstractConnection) -> None:
        self._connection = connection

    async def send(self, packed: bytes) -> None:
        """Write RESP-packed commands (no health check first: a fault shows on the read).

        redis-py reconnects a dropped connection here, and an error reply to its handshake
        (``SELECT`` of a database the server lacks) is raised typed, like any other reply."""
        try:
            await self._connection.send_packed_command(packed, False)
        except ResponseError as exc:
            raise refusal(exc) from exc

    async def read_replies(self, count: int) -> tuple[list[Any], RedisRefused | None]:
        """The next ``count`` replies in order, and the first error reply among them.

        An error reply takes its place in the list as a :class:`RedisRefused`: the replies after
        it must still be read, or the connection would hand them to the next caller. No timer is
        armed per reply (the pool has no socket timeout): the caller puts one deadline on the
        whole round trip. A fault raises one of :data:`FAULTS`.
        """
        read = self._connection.read_response
        replies: list[Any] = []
        first_error: RedisRefused | None = None
        for _ in range(count):
            try:
                replies.append(await read())
            except ResponseError as exc:
                refused = refusal(exc)
                replies.append(refused)
                if first_error is None:
                    first_error = refused
        return replies, first_error

    async def drop(self) -> None:
        """Close the socket (a half-read connection is useless); redis-py reconnects it on the
        next send."""
        await self._connection.disconnect(nowait=True)


class CommandPool:
    """The connections the command batcher holds for good, one per flusher.

    No socket timeout on these: redis-py would wrap every write in a ``wait_for`` task and every
    read in a timer; the batcher puts one deadline on each whole round trip instead. The pool
    can never run dry (one connection per flusher), so redis-py's cheaper non-blocking pool does.
    """

    def __init__(self, url: str, *, connections: int, client_name: str) -> None:
        self._pool = _pool(url, connections, _options(client_name, socket_timeout=None))

    async def connect(self) -> RawConnection:
        """A connected connection (raises one of :data:`FAULTS` when the server is away, and
        a :class:`RedisRefused` when it answers the handshake with an error: ``SELECT 99`` on a
        server with 16 databases)."""
        try:
            connection = await self._pool.get_connection()  # type: ignore[no-untyped-call]
        except ResponseError as exc:
            raise refusal(exc) from exc
        return RawConnection(connection)

    async def release(self, connection: RawConnection) -> None:
        await self._pool.release(connection._connection)

    async def aclose(self) -> None:
        """Close every connection of the pool."""
        await self._pool.disconnect()


async def subscribe(pubsub: PubSub, *channels: str, sharded: bool = False) -> None:
    """SUBSCRIBE (``SSUBSCRIBE`` when ``sharded``: a cluster's shard channels) on a redis-py
    ``PubSub``, with any failure of its connection raised as a fault.

    The wake-up dispatcher reads the ``PubSub`` in one task while agents subscribe from theirs.
    When Redis goes away, the reading task tears the connection down; a SUBSCRIBE sent in that
    moment fails inside redis-py with ``AttributeError`` (its stream writer is already gone)
    instead of ``ConnectionError`` — seen when Redis restarted under a worker starting agents,
    where it ended a sub-agent as failed. It is a lost connection like any other: the dispatcher
    re-subscribes every channel when it reconnects.
    """
    try:
        if sharded:
            await _sharded(pubsub, "SSUBSCRIBE", channels)
        else:
            await pubsub.subscribe(*channels)
    except AttributeError as exc:
        raise RedisConnectionError(f"connection reset during SUBSCRIBE: {exc}") from exc


async def unsubscribe(pubsub: PubSub, *channels: str, sharded: bool = False) -> None:
    """UNSUBSCRIBE (``SUNSUBSCRIBE`` when ``sharded``), with the same race as :func:`subscribe`
    raised as a fault."""
    try:
        if sharded:
            await _sharded(pubsub, "SUNSUBSCRIBE", channels)
        else:
            await pubsub.unsubscribe(*channels)
    except AttributeError as exc:
        raise RedisConnectionError(f"connection reset during UNSUBSCRIBE: {exc}") from exc


async def _sharded(pubsub: PubSub, command: str, channels: tuple[str, ...]) -> None:
    """``SSUBSCRIBE``/``SUNSUBSCRIBE`` on a ``PubSub``: its own method where redis-py's asyncio
    client has one (not yet in 5.3, the floor), else the command itself (5.3 reads the replies
    and ``smessage``s as any other pub/sub message; the bus never lets redis-py resubscribe, so
    the bookkeeping those methods add is not missed)."""
    method = getattr(pubsub, command.lower(), None)
    if method is not None:
        await method(*channels)
    else:
        await pubsub.execute_command(command, *channels)
