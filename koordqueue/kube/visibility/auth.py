"""Who is asking, and may they: delegated authentication and authorization.

What a Kubernetes aggregated API server does (k8s.io/apiserver's delegating authn/authz):

- The aggregator (kube-apiserver) connects with its proxy client certificate, signed by the
  requestheader client CA, and names the user it authenticated in headers (X-Remote-User,
  X-Remote-Group, X-Remote-Extra-*). The CA, the allowed certificate names and the header
  names come from the `kube-system/extension-apiserver-authentication` ConfigMap the API
  server publishes. The TLS layer verifies the certificate against that CA; the headers are
  trusted only on such a connection whose certificate's CN is allowed (any CN when the list
  is empty), never on another one.
- Anyone else (a client calling the Service directly) must bring a bearer token, checked with
  a TokenReview.
- Every request is then authorized with a SubjectAccessReview for the user (resource
  attributes for the API's resources, non-resource ones for discovery), as RBAC would answer
  it at the API server. Answers are cached for AUTH_CACHE_SECONDS, as the delegating
  authorizer's (10 s allowed, 10 s denied).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol
from urllib.parse import unquote

import orjson

from koordqueue.kube.api import ApiError, Kind, ObjectApi

CONFIG_MAP: Final = Kind("", "v1", "configmaps", "ConfigMap")
TOKEN_REVIEW: Final = Kind("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
SUBJECT_ACCESS_REVIEW: Final = Kind(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
AUTHENTICATION_CONFIG_MAP: Final = "extension-apiserver-authentication"
AUTHENTICATION_NAMESPACE: Final = "kube-system"
AUTH_CACHE_SECONDS: Final = 10.0
DEFAULT_USERNAME_HEADERS: Final = ("X-Remote-User",)
DEFAULT_GROUP_HEADERS: Final = ("X-Remote-Group",)
DEFAULT_EXTRA_PREFIXES: Final = ("X-Remote-Extra-",)


class AuthConfigError(RuntimeError):
    """The API server publishes no requestheader client CA: it cannot aggregate us."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class RequestHeaderConfig:
    """The requestheader-* keys of extension-apiserver-authentication."""

    client_ca: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = DEFAULT_USERNAME_HEADERS
    group_headers: tuple[str, ...] = DEFAULT_GROUP_HEADERS
    extra_prefixes: tuple[str, ...] = DEFAULT_EXTRA_PREFIXES


def _json_list(data: Mapping[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = data.get(key)
    if not raw:
        return default
    value = orjson.loads(raw)
    return tuple(str(v) for v in value) if isinstance(value, list) and value else default


def request_header_config(api: ObjectApi) -> RequestHeaderConfig:
    """Read the API server's front-proxy settings; AuthConfigError when it has none."""
    obj = api.get(CONFIG_MAP, AUTHENTICATION_CONFIG_MAP, AUTHENTICATION_NAMESPACE)
    data: Mapping[str, str] = (obj or {}).get("data") or {}
    ca = data.get("requestheader-client-ca-file")
    if not ca:
        raise AuthConfigError(
            f"{AUTHENTICATION_NAMESPACE}/{AUTHENTICATION_CONFIG_MAP} has no "
            "requestheader-client-ca-file: start kube-apiserver with "
            "--requestheader-client-ca-file and --proxy-client-cert-file/--proxy-client-key-file"
        )
    return RequestHeaderConfig(
        client_ca=ca,
        allowed_names=_json_list(data, "requestheader-allowed-names", ()),
        username_headers=_json_list(
            data, "requestheader-username-headers", DEFAULT_USERNAME_HEADERS
        ),
        group_headers=_json_list(data, "requestheader-group-headers", DEFAULT_GROUP_HEADERS),
        extra_prefixes=_json_list(
            data, "requestheader-extra-headers-prefix", DEFAULT_EXTRA_PREFIXES
        ),
    )


def common_name(peer_cert: Mapping[str, Any] | None) -> str | None:
    """The CN of a certificate as `ssl.SSLSocket.getpeercert()` returns it (verified)."""
    if not peer_cert:
        return None
    for rdn in peer_cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class Headers(Protocol):
    """A request's headers (`http.client.HTTPMessage` is one)."""

    def get_all(self, name: str, failobj: Any = None) -> Any: ...

    def items(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks to do, as a SubjectAccessReview names it."""

    verb: str
    path: str
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)


@dataclass(slots=True)
class _Cache:
    entries: dict[object, tuple[float, object]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: object, now: float) -> object | None:
        with self.lock:
            hit = self.entries.get(key)
            if hit is None or hit[0] < now:
                return None
            return hit[1]

    def put(self, key: object, value: object, until: float) -> None:
        with self.lock:
            if len(self.entries) > 4096:  # bounded: drop the expired (or everything)
                self.entries = {k: v for k, v in self.entries.items() if v[0] >= until - 60}
            self.entries[key] = (until, value)


class Delegated:
    """Authenticates and authorizes requests through the API server (module docstring)."""

    def __init__(
        self,
        api: ObjectApi,
        config: RequestHeaderConfig,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.config = config
        self.clock = clock
        self._tokens = _Cache()
        self._decisions = _Cache()

    # --- authentication ----------------------------------------------------------------
    def authenticate(
        self, peer_cert: Mapping[str, Any] | None, header: Headers
    ) -> User | None:
        """The user, or None (unauthenticated: 401). `peer_cert`: verified by TLS against
        the requestheader CA (the server's context trusts only that CA)."""
        cn = common_name(peer_cert)
        if cn is not None and (not self.config.allowed_names or cn in self.config.allowed_names):
            user = self._from_headers(header)
            if user is not None:
                return user
        for value in header.get_all("Authorization") or []:
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return self._token_review(token.strip())
        return None

    def _from_headers(self, header: Headers) -> User | None:
        def values(names: tuple[str, ...]) -> list[str]:
            return [v for h in names for v in (header.get_all(h) or []) if v]

        name = next(iter(values(self.config.username_headers)), "")
        if not name:
            return None
        extra: dict[str, list[str]] = {}
        prefixes = tuple(p.lower() for p in self.config.extra_prefixes)
        for key, value in header.items():
            lowered = key.lower()
            prefix = next((p for p in prefixes if lowered.startswith(p)), None)
            if prefix is not None and value:  # (k8s: keys lower-cased, then unescaped)
                extra.setdefault(unquote(lowered[len(prefix):]), []).append(value)
        return User(
            name,
            tuple(values(self.config.group_headers)),
            tuple((k, tuple(v)) for k, v in sorted(extra.items())),
        )

    def _token_review(self, token: str) -> User | None:
        now = self.clock()
        cached = self._tokens.get(token, now)
        if cached is not None:
            return cached if isinstance(cached, User) else None
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token}}
        status = self.api.create(TOKEN_REVIEW, body).get("status") or {}
        user: User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = tuple(
                (str(k), tuple(str(x) for x in v)) for k, v in (info.get("extra") or {}).items()
            )
            user = User(str(info.get("username") or ""), tuple(info.get("groups") or ()), extra)
        self._tokens.put(token, user if user is not None else False, now + AUTH_CACHE_SECONDS)
        return user

    # --- authorization -----------------------------------------------------------------
    def authorize(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, the reviewer's reason)."""
        now = self.clock()
        key = (user, attrs)
        cached = self._decisions.get(key, now)
        if isinstance(cached, tuple):
            return cached[0], cached[1]
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        if attrs.is_resource:
            spec["resourceAttributes"] = {
                "verb": attrs.verb, "group": attrs.group, "version": attrs.version,
                "resource": attrs.resource, "subresource": attrs.subresource,
                "name": attrs.name,
            }
        else:
            spec["nonResourceAttributes"] = {"verb": attrs.verb, "path": attrs.path}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": spec}
        try:
            status = self.api.create(SUBJECT_ACCESS_REVIEW, body).get("status") or {}
        except ApiError as exc:
            return False, f"authorization check failed: {exc.message}"
        decision = (bool(status.get("allowed")), str(status.get("reason") or ""))
        self._decisions.put(key, decision, now + AUTH_CACHE_SECONDS)
        return decision
