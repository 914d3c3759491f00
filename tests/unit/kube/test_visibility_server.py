"""The visibility API over real TLS: who may ask (delegated authn/authz) and what it answers.

The aggregator's identity headers count only on a connection whose client certificate the
requestheader CA signed and whose CN is allowed; every request is authorized with a
SubjectAccessReview; answers come from the last published round.
"""

from __future__ import annotations

import gzip
import http.client
import shutil
import ssl
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import Kind
from koordqueue.kube.visibility.auth import Delegated, RequestHeaderConfig
from koordqueue.kube.visibility.server import PREFIX, Routes, VisibilityServer
from koordqueue.kube.visibility.view import PendingView, Publication
from tests.unit.kube.quiet_server_checks import check_gone_clients_are_debug_lines

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _openssl(d: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)


def _cert(d: Path, name: str, ca: str, subj: str, usage: str, san: str = "") -> None:
    extra = ["-addext", f"subjectAltName={san}"] if san else []
    _openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", "1", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", "-subj", subj,
             "-addext", "basicConstraints=critical,CA:FALSE",
             "-addext", f"extendedKeyUsage={usage}", *extra)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "proxy-ca", "other-ca"):
        _openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-subj", f"/CN={ca}",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign")
    _cert(d, "serving", "ca", "/CN=koordqueue-visibility.koord-queue.svc", "serverAuth",
          "DNS:koordqueue-visibility.koord-queue.svc")
    _cert(d, "proxy", "proxy-ca", "/CN=front-proxy-client", "clientAuth")
    _cert(d, "stranger", "proxy-ca", "/CN=someone-else", "clientAuth")
    _cert(d, "forged", "other-ca", "/CN=front-proxy-client", "clientAuth")
    return d


class ReviewApi:
    """TokenReviews and SubjectAccessReviews answered from tables; records every review."""

    def __init__(self) -> None:
        self.tokens: dict[str, str] = {"good-token": "alice"}
        self.allowed: set[tuple[str, str, str]] = set()  # (user, verb, resource/sub or path)
        self.reviews: list[dict[str, Any]] = []

    def create(self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None
               ) -> dict[str, Any]:
        self.reviews.append(dict(body))
        spec = body["spec"]
        if kind.plural == "tokenreviews":
            user = self.tokens.get(spec["token"])
            if user is None:
                return {"status": {"authenticated": False}}
            return {"status": {"authenticated": True, "user": {"username": user,
                                                                "groups": ["devs"]}}}
        attrs = spec.get("resourceAttributes")
        if attrs:
            what = attrs["resource"] + (f"/{attrs['subresource']}" if attrs["subresource"]
                                        else "")
            verb = attrs["verb"]
        else:
            what, verb = spec["nonResourceAttributes"]["path"], "get"
        ok = (spec["user"], verb, what) in self.allowed or "system:masters" in spec["groups"]
        return {"status": {"allowed": ok, "reason": "" if ok else "no RBAC rule"}}

    def get(self, *_: Any, **__: Any) -> None:  # pragma: no cover (unused)
        return None


def unit(name: str, quota: str, cpu: str = "1", priority: int = 0) -> QueueUnit:
    return QueueUnit("team", name, uid=name, resource=Resources.of(cpu=cpu),
                     priority=priority, labels={QUOTA_NAME_LABEL: quota})


@pytest.fixture
def serving(pki: Path) -> Iterator[tuple[VisibilityServer, ReviewApi, Publication]]:
    api = ReviewApi()
    config = RequestHeaderConfig((pki / "proxy-ca.crt").read_text(), ("front-proxy-client",))
    publication = Publication()
    clock = [0.0]
    api.clock = clock  # type: ignore[attr-defined]
    auth = Delegated(api, config, clock=lambda: clock[0])  # type: ignore[arg-type]
    routes = Routes(PendingView(publication), auth)
    server = VisibilityServer(routes, 0, str(pki / "serving.crt"), str(pki / "serving.key"),
                              host="127.0.0.1").start()
    yield server, api, publication
    server.stop()


def get(pki: Path, port: int, path: str, cert: str | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert:
        ctx.load_cert_chain(str(pki / f"{cert}.crt"), str(pki / f"{cert}.key"))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
    conn.sock = ctx.wrap_socket(  # the aggregator's ServerName: the Service's name
        __import__("socket").create_connection(("127.0.0.1", port)),
        server_hostname="koordqueue-visibility.koord-queue.svc",
    )
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    body = orjson.loads(response.read())
    conn.close()
    return response.status, body


AGGREGATED = {"X-Remote-User": "alice", "X-Remote-Group": "devs"}


def publish_round(publication: Publication) -> None:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="1")))
    engine.upsert_queue("q", "Priority")
    for u in (unit("first", "q"), unit("big", "q", cpu="4", priority=9),
              unit("small", "q", priority=1)):
        engine.upsert_unit(u)
    publication.publish(engine.run_round(100.0), 100.0)


def test_the_aggregators_user_reads_pending_units_in_round_order(serving: Any, pki: Path
                                                                 ) -> None:
    server, api, publication = serving
    api.allowed.add(("alice", "list", "pendingunits"))
    publish_round(publication)
    code, body = get(pki, server.port, f"{PREFIX}/pendingunits", "proxy", AGGREGATED)
    assert code == 200, body
    rows = [(i["metadata"]["name"], i["positionInQueue"], i["reason"]) for i in body["items"]]
    assert rows == [("big", 1, "QuotaExceeded"), ("first", 2, "QuotaExceeded")]
    assert body["items"][0]["request"] == {"cpu": "4"}
    assert body["items"][0]["message"] == "limited quotaName:q, limited resKey:cpu,"
    assert body["round"]["number"] == 1
    sar = api.reviews[-1]["spec"]
    assert (sar["user"], sar["groups"]) == ("alice", ["devs"])
    api.clock[0] += 11
    headers = {**AGGREGATED, "X-Remote-Extra-Scopes": "view", "X-Remote-Extra-Acme.com%2fteam": "a"}
    code, _ = get(pki, server.port, f"{PREFIX}/pendingunits", "proxy", headers)
    assert code == 200
    assert api.reviews[-1]["spec"]["extra"] == {"acme.com/team": ["a"], "scopes": ["view"]}


def test_identity_headers_without_the_proxy_certificate_are_ignored(serving: Any, pki: Path
                                                                    ) -> None:
    server, api, publication = serving
    api.allowed.add(("alice", "list", "pendingunits"))
    publish_round(publication)
    for cert in (None, "forged"):
        try:
            code, _ = get(pki, server.port, f"{PREFIX}/pendingunits", cert, AGGREGATED)
        except (ssl.SSLError, ConnectionError):
            code = 0  # a certificate another CA signed does not get through the handshake
        assert code in (0, 401) and (cert is None) == (code == 401)
    code, _ = get(pki, server.port, f"{PREFIX}/pendingunits", "stranger", AGGREGATED)
    assert code == 401  # the right CA, a CN not in requestheader-allowed-names


def test_a_bearer_token_is_reviewed_and_access_is_checked(serving: Any, pki: Path) -> None:
    server, api, publication = serving
    publish_round(publication)
    token = {"Authorization": "Bearer good-token"}
    code, body = get(pki, server.port, f"{PREFIX}/queues/q/queueunits", None, token)
    assert code == 403
    assert 'cannot get resource "queues/queueunits"' in body["message"]
    api.allowed.add(("alice", "get", "queues/queueunits"))
    api.clock[0] += 11  # past the cached denial (AUTH_CACHE_SECONDS)
    code, body = get(pki, server.port, f"{PREFIX}/queues/q/queueunits?limit=1&offset=1",
                     None, token)
    assert code == 200 and body["total"] == 2
    assert [i["metadata"]["name"] for i in body["items"]] == ["first"]
    code, _ = get(pki, server.port, f"{PREFIX}/pendingunits", None,
                  {"Authorization": "Bearer bad"})
    assert code == 401


def test_discovery_and_errors(serving: Any, pki: Path) -> None:
    server, _api, publication = serving
    masters = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}
    code, body = get(pki, server.port, PREFIX, "proxy", masters)
    assert code == 200
    assert {r["name"] for r in body["resources"]} >= {"pendingunits", "queues/queueunits",
                                                      "elasticquotas/queueunits"}
    code, body = get(pki, server.port, f"{PREFIX}/pendingunits", "proxy", masters)
    assert code == 503 and "no admission round yet" in body["message"]
    publish_round(publication)
    code, body = get(pki, server.port, f"{PREFIX}/pendingunits?limit=x", "proxy", masters)
    assert code == 400 and body["message"] == "limit: not an integer: 'x'"
    code, body = get(pki, server.port, f"{PREFIX}/elasticquotas/q/queueunits", "proxy", masters)
    assert code == 200 and [i["positionInQuota"] for i in body["items"]] == [1, 2]
    code, body = get(pki, server.port, f"{PREFIX}/nothing", "proxy", masters)
    assert code == 404
    code, body = get(pki, server.port, "/healthz")
    assert code == 200


def test_the_front_proxy_configuration_is_read_or_its_absence_named() -> None:
    from koordqueue.kube.settings import ControllerSettings
    from koordqueue.kube.visibility.auth import AuthConfigError, request_header_config
    from koordqueue.kube.visibility.serve import VisibilityConfigError, register_visibility

    class ConfigMaps:
        def __init__(self, data: dict[str, str]) -> None:
            self.data = data

        def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any]:
            assert (kind.plural, name, namespace) == (
                "configmaps", "extension-apiserver-authentication", "kube-system")
            return {"data": self.data}

    config = request_header_config(ConfigMaps({  # type: ignore[arg-type]
        "requestheader-client-ca-file": "PEM",
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
    }))
    assert (config.client_ca, config.allowed_names) == ("PEM", ("front-proxy-client",))
    assert config.group_headers == ("X-Remote-Group",)
    with pytest.raises(AuthConfigError, match="--requestheader-client-ca-file"):
        request_header_config(ConfigMaps({"client-ca-file": "PEM"}))  # type: ignore[arg-type]
    with pytest.raises(VisibilityConfigError, match="--visibility-cert"):
        register_visibility(None, ControllerSettings(visibility_port=8443), Publication(),
                            None)  # type: ignore[arg-type]


def test_a_client_gone_mid_answer_is_a_debug_line_and_other_failures_an_error(
    serving: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    """socketserver's default printed a traceback on stderr for every poller that stopped
    while its answer was being written (an SSLEOFError in sendall)."""
    check_gone_clients_are_debug_lines(serving[0]._server, "visibility", capsys)


def test_a_long_answer_is_gzipped_for_a_client_that_asks_and_only_then(serving: Any, pki: Path
                                                                        ) -> None:
    server, api, publication = serving
    api.allowed.add(("alice", "list", "pendingunits"))
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="0")))
    engine.upsert_queue("q", "Priority")
    for i in range(100):  # ~35 KB of JSON
        engine.upsert_unit(unit(f"u{i:03d}", "q"))
    publication.publish(engine.run_round(1.0), 1.0)
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "proxy.crt"), str(pki / "proxy.key"))
    answers = {}
    for encoding in ("gzip", "identity"):
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx)
        conn.sock = ctx.wrap_socket(
            __import__("socket").create_connection(("127.0.0.1", server.port)),
            server_hostname="koordqueue-visibility.koord-queue.svc",
        )
        conn.request("GET", f"{PREFIX}/pendingunits",
                     headers={**AGGREGATED, "Accept-Encoding": encoding})
        response = conn.getresponse()
        answers[encoding] = (response.getheader("Content-Encoding"), response.read())
        conn.close()
    encoding, body = answers["gzip"]
    assert encoding == "gzip" and len(body) * 5 < len(answers["identity"][1])
    assert answers["identity"][0] is None
    assert orjson.loads(gzip.decompress(body)) == orjson.loads(answers["identity"][1])
    assert len(orjson.loads(answers["identity"][1])["items"]) == 100
