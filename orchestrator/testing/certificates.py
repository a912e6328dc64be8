"""Throwaway TLS certificates for a test's ``redis-server --tls-port``, made with the ``openssl``
command when the test runs: a CA, a server certificate it issued (for ``127.0.0.1`` and
``localhost`` unless told other hosts) and a client certificate for mutual TLS. Nothing is
checked in, so nothing expires in the repository; a second call gives an unrelated CA (the
"wrong CA" of a test).
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from baton.errors import ConfigError

DAYS = 2
"""How long the certificates are valid: a test run, with room for a clock that is a day off."""

_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")  # fast to make, unlike RSA
_CA_EXTENSIONS = (
    "basicConstraints=critical,CA:TRUE",
    "keyUsage=critical,keyCertSign,cRLSign",
    "subjectKeyIdentifier=hash",
)
_LEAF_EXTENSIONS = """\
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage={usage}
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName={names}
"""


@dataclass(frozen=True)
class Certificates:
    """PEM files in one directory: a CA and the server and client certificates it issued."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def openssl() -> str:
    """Path of ``openssl``; raises ``ConfigError`` when missing."""
    binary = shutil.which("openssl")
    if binary is None:
        raise ConfigError("openssl is not on PATH: install it (Debian: apt-get install openssl)")
    return binary


def make_certificates(
    directory: Path,
    *,
    name: str = "baton test CA",
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
) -> Certificates:
    """A new CA in ``directory`` and a server and a client certificate signed by it, both for
    ``hosts`` (IP addresses and DNS names)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = directory / "ca.key", directory / "ca.crt"
    addext = [arg for ext in _CA_EXTENSIONS for arg in ("-addext", ext)]
    _run("req", "-x509", "-nodes", *_KEY, "-keyout", ca_key, "-out", ca_cert,
         "-days", str(DAYS), "-subj", f"/CN={name}", *addext)  # fmt: skip
    leaves = {}
    for role, usage in (("server", "serverAuth"), ("client", "clientAuth")):
        key, csr, cert = (directory / f"{role}.{ext}" for ext in ("key", "csr", "crt"))
        extensions = directory / f"{role}.ext"
        extensions.write_text(_LEAF_EXTENSIONS.format(usage=usage, names=_alt_names(hosts)))
        _run("req", "-new", "-nodes", *_KEY, "-keyout", key, "-out", csr,
             "-subj", f"/CN=baton test {role}")  # fmt: skip
        _run("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", str(DAYS), "-extfile", extensions)  # fmt: skip
        leaves[role] = (cert, key)
    return Certificates(
        ca_cert=ca_cert,
        server_cert=leaves["server"][0],
        server_key=leaves["server"][1],
        client_cert=leaves["client"][0],
        client_key=leaves["client"][1],
    )


def _alt_names(hosts: Sequence[str]) -> str:
    def one(host: str) -> str:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return f"DNS:{host}"
        return f"IP:{host}"

    return ",".join(map(one, hosts))


def _run(*args: str | Path) -> None:
    done = subprocess.run(
        [openssl(), *map(str, args)], capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        raise ConfigError(f"openssl {args[0]} failed ({done.returncode}): {done.stderr.strip()}")


__all__ = ["Certificates", "make_certificates", "openssl"]
