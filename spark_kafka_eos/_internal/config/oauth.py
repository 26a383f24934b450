"""OAUTHBEARER for the transaction session (kafka-python): OIDC client credentials, as librdkafka's
``sasl.oauthbearer.method=oidc`` does it for the data path.

The token is fetched from ``sasl.oauthbearer.token.endpoint.url`` with the client credentials grant
(client id and secret in HTTP Basic auth, optional scope) and kept until 80% of its lifetime.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import urllib.request

from kafka.net.sasl.oauth import AbstractTokenProvider

_REFRESH_AT_SHARE = 0.8
_REQUEST_TIMEOUT_S = 30


class OAuthTokenError(RuntimeError):
    """The token endpoint did not give a token."""


class OidcClientCredentials(AbstractTokenProvider):
    """A kafka-python token provider for the OIDC client credentials grant. Its repr shows no secret."""

    def __init__(self, token_endpoint_url: str, client_id: str, client_secret: str, scope: str | None = None) -> None:
        self._url, self._client_id, self._client_secret, self._scope = token_endpoint_url, client_id, client_secret, scope
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock = threading.Lock()

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.monotonic() >= self._refresh_at:
                self._token, lifetime_s = self._fetch()
                self._refresh_at = time.monotonic() + lifetime_s * _REFRESH_AT_SHARE
            return self._token

    def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials", **({"scope": self._scope} if self._scope else {})}
        credentials = base64.b64encode(f"{self._client_id}:{self._client_secret}".encode()).decode()
        request = urllib.request.Request(
            self._url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {credentials}", "Content-Type": "application/x-www-form-urlencoded",
                     "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=_REQUEST_TIMEOUT_S) as response:
                body = json.loads(response.read())
        except (OSError, ValueError) as err:
            raise OAuthTokenError(f"the OAuth token endpoint {self._url} gave no token: {err}") from None
        if not isinstance(body, dict) or not body.get("access_token"):
            raise OAuthTokenError(f"the OAuth token endpoint {self._url} answered without an access_token")
        return str(body["access_token"]), float(body.get("expires_in", 3600))

    def __repr__(self) -> str:
        return f"OidcClientCredentials(token_endpoint_url={self._url!r}, client_id={self._client_id!r})"
