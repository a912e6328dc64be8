"""Support for tests of code built on baton — baton's own tests and benchmarks use it too.

- :class:`RedisServer`: a real, throwaway ``redis-server`` on a free port (killable, restartable,
  removed on exit), for testing Redis-backed code against Redis itself; :func:`free_port` and
  :func:`redis_cli` go with it. It can be secured as a deployment would be (a password, ACL
  users, TLS only: a :class:`RedisSecurity`), with certificates :func:`make_certificates` makes
  at run time.
- :class:`S3Server`: a throwaway S3-compatible server (moto's server mode) on a free port, for
  the media store's bucket (``docs/media.md``); :meth:`S3Server.env` gives the ``AWS_*``
  variables that reach it.
- :func:`local_model_requests_only`: model requests may reach only loopback endpoints and the
  in-process scripted server (:class:`baton.llm.ScriptedServer`); any other raises
  :class:`ModelRequestRefused` before it is sent, so a key in the shell cannot make a test call a
  real API.

Nothing in the runtime imports this package.
"""

from baton.llm.guard import ModelRequestRefused
from baton.testing.certificates import Certificates, make_certificates
from baton.testing.models import local_model_requests_only
from baton.testing.redis_server import RedisSecurity, RedisServer, free_port, redis_cli
from baton.testing.s3_server import S3Server

__all__ = [
    "Certificates",
    "ModelRequestRefused",
    "RedisSecurity",
    "RedisServer",
    "S3Server",
    "free_port",
    "local_model_requests_only",
    "make_certificates",
    "redis_cli",
]
