"""The console's access rules: the bind rule and the token gate (bearer header, login cookie)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from ctxstore.errors import ConfigurationError
from ctxstore.web.access import COOKIE, TokenGate, check_bind, cookie_value, is_loopback

TOKEN = "s3cret-token"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.com", ""])
def test_any_other_address_refuses_to_start_without_a_token(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ConfigurationError, match="without a token"):
        check_bind(host, None)
    check_bind(host, TOKEN)


def test_an_empty_token_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="empty"):
        check_bind("0.0.0.0", "  ")


def _login_page(target: str, failed: bool) -> str:
    return f"login to {target}{' (wrong token)' if failed else ''}"


@pytest.fixture
def client() -> TestClient:
    async def page(request: Any) -> PlainTextResponse:
        return PlainTextResponse(f"secret {request.url.path}")

    inner = Starlette(routes=[Route("/{path:path}", page, methods=["GET", "POST"])])
    return TestClient(TokenGate(inner, TOKEN, _login_page), follow_redirects=False)


def test_requests_without_the_token_get_401_and_no_data(client: TestClient) -> None:
    for method in ("GET", "POST", "PUT", "DELETE", "HEAD"):
        response = client.request(method, "/chats?x=1")
        assert response.status_code == 401
        assert "secret" not in response.text
    response = client.get("/chats?x=1")
    assert response.text == "login to /chats?x=1"
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_bearer_token_opens_every_page(client: TestClient) -> None:
    assert client.get("/a", headers={"Authorization": f"Bearer {TOKEN}"}).text == "secret /a"
    assert client.get("/a", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/a", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401


def test_the_login_form_sets_a_cookie_that_is_not_the_token(client: TestClient) -> None:
    assert client.get("/login?next=/chats").text == "login to /chats"
    wrong = client.post("/login", data={"token": "nope", "next": "/chats"})
    assert wrong.status_code == 401
    assert "wrong token" in wrong.text
    assert COOKIE not in client.cookies
    right = client.post("/login", data={"token": TOKEN, "next": "/chats"})
    assert right.status_code == 303
    assert right.headers["location"] == "/chats"
    set_cookie = right.headers["set-cookie"]
    assert "HttpOnly" in set_cookie
    assert "SameSite=Strict" in set_cookie
    assert TOKEN not in set_cookie
    assert client.cookies[COOKIE] == cookie_value(TOKEN)
    assert client.get("/chats").text == "secret /chats"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/\\evil"])
def test_the_login_never_sends_the_browser_to_another_site(client: TestClient, target: str) -> None:
    response = client.post("/login", data={"token": TOKEN, "next": target})
    assert response.headers["location"] == "/"


def test_a_forged_cookie_is_refused(client: TestClient) -> None:
    client.cookies.set(COOKIE, TOKEN)
    assert client.get("/a").status_code == 401


def test_importing_the_console_loads_no_web_framework() -> None:
    from tests.store.test_api import loaded_after

    frameworks = ("starlette", "jinja2", "uvicorn", "fastapi", "litellm")
    assert loaded_after("import ctxstore, ctxstore.web", frameworks) == []
    assert loaded_after("import ctxstore.web.access, ctxstore.web.tenants", frameworks) == []
