"""The console connected as a tenant's ACL user (deploy/acl.conf): every page of its own
namespace works; the workers page says what the user lacks the rights to read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

import ctxstore
import ctxstore.web
from tests.support import servers
from tests.web.conftest import seed


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.RedisProcess]:
    with servers.acl_standalone(tmp_path_factory.mktemp("acl")) as server:
        yield server


def test_a_tenant_user_reads_its_namespace_and_is_told_what_it_cannot(
    acl_server: servers.RedisProcess,
) -> None:
    url = f"redis://acme:change-me-acme@127.0.0.1:{acl_server.port}/0"
    store = ctxstore.connect(url, namespace="acme").admin()
    main, _v2, _v3 = seed(store)
    with TestClient(ctxstore.web.app(url, namespaces=["acme"])) as client:
        for path, query in [
            ("", {}),
            ("chat", {"id": "trip", "around": main[15], "message": main[14]}),
            ("message", {"id": "trip", "m": main[3]}),
            ("context", {"id": "trip"}),
            ("summaries", {"id": "trip"}),
            ("live", {"id": "trip"}),
            ("export", {"id": "trip"}),
        ]:
            response = client.get(f"/n/acme/{path}", params=query)
            assert response.status_code == 200, (path, response.text[-400:])
        assert (
            "They planned three days in Lisbon."
            in client.get("/n/acme/summaries", params={"id": "trip"}).text
        )
        workers = client.get("/n/acme/workers")
        assert workers.status_code == 200
        assert "lacks the rights to read it" in workers.text
    store.close()
