"""The live page: an answer streamed now, as server-sent events, resumed after the last piece a
browser saw; the turn lease."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
from starlette.testclient import TestClient

import ctxstore.web
from ctxstore._core.ops.streams import begin_stream, end_stream, write_stream
from tests.web.conftest import Seeded, serving

TTL = 60_000


def events(lines: Any, until: str) -> list[tuple[str, str, Any]]:
    """(id, event, data) of each event read, up to and including the first ``until``."""
    found: list[tuple[str, str, Any]] = []
    current: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        if not line:
            if current:
                found.append((current.get("id", ""), current["event"], json.loads(current["data"])))
                if current["event"] == until:
                    return found
            current = {}
            continue
        key, _, value = line.partition(": ")
        current[key] = value
    return found


def test_an_answer_streams_as_it_arrives_and_resumes(seeded: Seeded) -> None:
    store, state = seeded.store, seeded.store.state
    stream = store.run(begin_stream(state, "trip", "main-v3", writer_ttl_ms=TTL))
    store.run(write_stream(state, "trip", stream, 1, "Three days ", writer_ttl_ms=TTL))

    def finish() -> None:
        time.sleep(0.3)
        store.run(write_stream(state, "trip", stream, 2, "in Lisbon.", writer_ttl_ms=TTL))
        store.run(end_stream(state, "trip", stream, done=True, detail=seeded.v3[-1], keep_ms=TTL))

    writer = threading.Thread(target=finish)
    with serving(ctxstore.web.app(store)) as base:
        url = f"{base}/n/{seeded.namespace}/live/events"
        page = httpx.get(f"{base}/n/{seeded.namespace}/live", params={"id": "trip"}).text
        assert f"streaming {stream}" in page
        writer.start()
        with httpx.stream("GET", url, params={"id": "trip"}, timeout=30) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            got = events(response.iter_lines(), until="done")
        writer.join()
        assert [kind for _, kind, _ in got] == ["stream", "piece", "piece", "done"]
        assert "".join(data for _, kind, data in got if kind == "piece") == "Three days in Lisbon."
        first_piece = got[1][0]
        assert first_piece.startswith(f"{stream} ")
        # A browser reconnecting sends the last id it saw: the rest follows, nothing twice.
        with httpx.stream(
            "GET", url, params={"id": "trip"}, headers={"Last-Event-ID": first_piece}, timeout=30
        ) as response:
            again = events(response.iter_lines(), until="done")
        assert [data for _, kind, data in again if kind == "piece"] == ["in Lisbon."]


def test_the_live_page_shows_the_turn_lease(seeded: Seeded) -> None:
    key = seeded.store.state.keyspace.chat("trip").key("chat")
    expires = int(time.time() * 1000) + 30_000
    seeded.store.client.hset(key, "turn", f"12\tworker-7\t{expires}")
    with TestClient(ctxstore.web.app(seeded.store)) as client:
        html = client.get(f"/n/{seeded.namespace}/live", params={"id": "trip"}).text
    assert "holder <code>worker-7</code>, fence 12, expires in" in html
    assert "waiting for an answer" in html


def test_concurrent_requests_on_a_sync_store_are_served(seeded: Seeded) -> None:
    """A sync store's reads run in worker threads: many requests at once all read right."""
    from concurrent.futures import ThreadPoolExecutor

    paths = ["", "chat", "summaries", "context", "workers", "message"]
    query = {"id": "trip", "m": seeded.main[4]}
    with serving(ctxstore.web.app(seeded.store)) as base, httpx.Client(timeout=30) as client:

        def fetch(i: int) -> tuple[int, str]:
            path = paths[i % len(paths)]
            response = client.get(f"{base}/n/{seeded.namespace}/{path}", params=query)
            return response.status_code, response.text

        with ThreadPoolExecutor(12) as pool:
            results = list(pool.map(fetch, range(48)))
    assert all(status == 200 for status, _ in results)
    assert all("Lisbon trip" in text for status, text in results[0::6])
