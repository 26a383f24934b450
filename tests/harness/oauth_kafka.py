"""A second single-node broker with a SASL/OAUTHBEARER listener, and an OIDC token endpoint.

The listener uses Kafka's default (unsecured) JWS validator, so the token endpoint can issue
unsigned JWTs: enough to run the OIDC client credentials flow of every client end to end.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import TracebackType

from tests.harness.local_kafka import LocalKafka, conf_with_listener, free_loopback_port

CLIENT_ID = "spark-job"
CLIENT_SECRET = "oidc-client-secret-7f3a"

_OAUTH = """sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
"""


def _b64(claims: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")


class TokenEndpoint:
    """An OIDC token endpoint on loopback: the client credentials grant for :data:`CLIENT_ID`."""

    def __init__(self) -> None:
        self.grants: list[str] = []  # the User-Agent of each granted request
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
                if self.headers.get("Authorization") != expected:
                    self.send_response(401)
                    self.end_headers()
                    return
                endpoint.grants.append(self.headers.get("User-Agent", ""))
                now = int(time.time())
                token = f"{_b64({'alg': 'none'})}.{_b64({'sub': CLIENT_ID, 'iat': now, 'exp': now + 3600})}."
                body = json.dumps({"access_token": token, "token_type": "bearer", "expires_in": 3600}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/token"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class OAuthKafka(LocalKafka):
    """A :class:`LocalKafka` with an OAUTHBEARER listener, and its token endpoint."""

    def __init__(self, data_dir: Path) -> None:
        self.oauth_port = free_loopback_port()
        conf_dir = conf_with_listener(Path(data_dir), "OAUTH", "SASL_PLAINTEXT", self.oauth_port, _OAUTH)
        super().__init__(Path(data_dir) / "data", conf_dir=conf_dir)
        self.token_endpoint = TokenEndpoint()

    def oauth_options(self) -> dict[str, str]:
        """kafka.* options that connect over OAUTHBEARER with OIDC client credentials."""
        return {
            "kafka.bootstrap.servers": f"127.0.0.1:{self.oauth_port}",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.oauthbearer.method": "oidc",
            "kafka.sasl.oauthbearer.client.id": CLIENT_ID,
            "kafka.sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "kafka.sasl.oauthbearer.token.endpoint.url": self.token_endpoint.url,
        }

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self.token_endpoint.close()
