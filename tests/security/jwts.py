"""Decentralized (JWT) auth for tests: an operator, an account with JetStream, and users with
``.creds`` files, signed with ``nkeys`` the way nats-io/jwt v2 encodes them."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import nkeys

UNLIMITED = -1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _new_key(prefix: int) -> nkeys.KeyPair:
    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix))


def _public(key: nkeys.KeyPair) -> str:
    return str(key.public_key.decode())


def encode_jwt(
    issuer: nkeys.KeyPair, subject: str, name: str, nats: dict[str, Any], **extra: Any
) -> str:
    """A v2 NATS JWT: ``jti`` is the base32 SHA-512/256 of the claims without it, signed by
    ``issuer`` over ``header.payload``."""
    claims: dict[str, Any] = {
        "iat": int(time.time()),
        "iss": _public(issuer),
        "name": name,
        "sub": subject,
        **extra,
    }
    digest = hashlib.new("sha512_256", json.dumps(claims).encode()).digest()
    claims["jti"] = base64.b32encode(digest).rstrip(b"=").decode()
    claims["nats"] = {**nats, "version": 2}
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = _b64(json.dumps(claims).encode())
    signature = _b64(issuer.sign(f"{header}.{payload}".encode()))
    return f"{header}.{payload}.{signature}"


@dataclasses.dataclass(frozen=True)
class Operator:
    """One operator with a system account and one JetStream-enabled account;
    ``server_config()`` trusts it."""

    operator: nkeys.KeyPair
    account: nkeys.KeyPair
    operator_jwt: str
    account_jwt: str
    system: nkeys.KeyPair
    system_jwt: str

    def server_config(self) -> str:
        return (
            f"operator: {self.operator_jwt}\n"
            f"system_account: {_public(self.system)}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f"  {_public(self.system)}: {self.system_jwt}\n"
            f"  {_public(self.account)}: {self.account_jwt}\n"
            "}\n"
        )

    def user_creds(self, path: Path, name: str, *, expires_in: float | None = None) -> Path:
        """Write a ``.creds`` file for a new user of the account; ``expires_in`` seconds from
        now (negative: already expired)."""
        user = _new_key(nkeys.PREFIX_BYTE_USER)
        extra = {"exp": int(time.time() + expires_in)} if expires_in is not None else {}
        limits = {"subs": UNLIMITED, "data": UNLIMITED, "payload": UNLIMITED}
        user_jwt = encode_jwt(
            self.account,
            _public(user),
            name,
            {"type": "user", "pub": {}, "sub": {}, **limits},
            **extra,
        )
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{user_jwt}\n"
            "------END NATS USER JWT------\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{user.seed.decode()}\n"
            "------END USER NKEY SEED------\n"
        )
        return path


def make_operator() -> Operator:
    operator = _new_key(nkeys.PREFIX_BYTE_OPERATOR)
    account = _new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    system = _new_key(nkeys.PREFIX_BYTE_ACCOUNT)  # the server needs one for JetStream
    operator_jwt = encode_jwt(
        operator,
        _public(operator),
        "test-operator",
        {"type": "operator", "system_account": _public(system)},
    )
    system_jwt = encode_jwt(operator, _public(system), "SYS", {"type": "account"})
    limits = {
        "subs": UNLIMITED,
        "data": UNLIMITED,
        "payload": UNLIMITED,
        "imports": UNLIMITED,
        "exports": UNLIMITED,
        "wildcards": True,
        "conn": UNLIMITED,
        "leaf": UNLIMITED,
        "mem_storage": UNLIMITED,  # JetStream is on for an account with storage limits
        "disk_storage": UNLIMITED,
        "streams": UNLIMITED,
        "consumer": UNLIMITED,
    }
    account_jwt = encode_jwt(
        operator, _public(account), "app", {"type": "account", "limits": limits}
    )
    return Operator(operator, account, operator_jwt, account_jwt, system, system_jwt)
