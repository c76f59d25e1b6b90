"""Every page of the web console, through Starlette's test client, on the embedded store and a
redis-server: what each shows, paging, filters, 404s outside the namespaces served."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from starlette.testclient import TestClient

import ctxstore
import ctxstore.web
from ctxstore._core.ops.graph_window import graph_window
from ctxstore.models import CompactionTrigger
from ctxstore.web.application import PAGE_RADIUS
from ctxstore.web.marks import SHOWN
from tests.support.wire import trace_wire
from tests.web.conftest import USER, Seeded
from tests.worker.support import running


def page(client: TestClient, seeded: Seeded, path: str, **query: Any) -> Any:
    response = client.get(f"/n/{seeded.namespace}/{path}", params=query)
    assert response.status_code == 200, response.text[:500]
    return response


def test_home_goes_to_the_first_namespace(client: TestClient, seeded: Seeded) -> None:
    response = client.get("/")
    assert response.status_code == 307
    assert response.headers["location"] == f"/n/{seeded.namespace}/"


def test_the_chats_page_lists_the_chat_with_its_figures(client: TestClient, seeded: Seeded) -> None:
    html = page(client, seeded, "").text
    row = re.search(r'<tr class="chat-row" data-id="trip">(.*?)</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert "Lisbon trip" in cells[0]
    assert cells[1] == "trip"
    assert USER in cells[2]
    assert cells[3] == "35"  # messages: 30 + 3 + 2
    assert cells[4] == "3"  # branches
    size = seeded.store.branch_size("trip")
    assert cells[5] == str(size.context_tokens)
    assert "kept" in cells[6]  # no retention


def test_chats_are_paged_and_filtered(seeded: Seeded) -> None:
    for i in range(60):
        owner = "bob" if i % 3 == 0 else "carol"
        seeded.store.upsert_chat(f"extra-{i:02d}", owner)
        seeded.store.update_chat(f"extra-{i:02d}", title=f"Note {i:02d}")
    with TestClient(ctxstore.web.app(seeded.store)) as client:
        first = page(client, seeded, "").text
        assert first.count('class="chat-row"') == 50
        more = re.search(r'id="next-page" href="([^"]+)"', first)
        assert more is not None
        second = client.get(more.group(1).replace("&amp;", "&")).text
        assert second.count('class="chat-row"') == 11
        assert 'id="next-page"' not in second
        listed = set(re.findall(r'class="chat-row" data-id="([^"]+)"', first + second))
        assert len(listed) == 61
        bobs = page(client, seeded, "", user="bob").text
        assert bobs.count('class="chat-row"') == 20
        found = page(client, seeded, "", q="note 4").text  # titles Note 40..49, any case
        assert sorted(re.findall(r'data-id="([^"]+)"', found)) == [f"extra-4{i}" for i in range(10)]
        by_id = page(client, seeded, "", q="TRI").text
        assert re.findall(r'class="chat-row" data-id="([^"]+)"', by_id) == ["trip"]


def test_badges_show_a_stream_a_lease_and_a_pending_job(seeded: Seeded) -> None:
    from ctxstore._core.ops.streams import begin_stream

    state = seeded.store.state
    seeded.store.run(begin_stream(state, "trip", "main-v3", writer_ttl_ms=60_000))
    key = state.keyspace.chat("trip").key("chat")
    raw = seeded.store.client
    raw.hset(key, mapping={"turn": f"7\tworker-1\t{2 * 10**13}", "cjob": "5\t1"})
    with TestClient(ctxstore.web.app(seeded.store)) as client:
        html = page(client, seeded, "").text
    for badge in ("streaming", "turn lease", "compaction pending"):
        assert f">{badge}</span>" in html


def test_the_chat_page_draws_the_window_as_svg(client: TestClient, seeded: Seeded) -> None:
    head = seeded.store.run(graph_window(seeded.store.state, "trip", radius=PAGE_RADIUS))
    assert head.center_id == seeded.v3[-1]  # by default, the active branch's head
    default = page(client, seeded, "chat", id="trip").text
    assert re.findall(r'<g class="node[^"]*" data-id="([^"]+)"', default) == [
        node.id for node in head.nodes
    ]
    # around main's 16th message: the forks of main-v2 and main-v3, the checkpoint, the summary
    html = page(client, seeded, "chat", id="trip", around=seeded.main[15]).text
    window = seeded.store.run(
        graph_window(seeded.store.state, "trip", around=seeded.main[15], radius=PAGE_RADIUS)
    )
    assert window.lanes == 3
    nodes = re.findall(r'<g class="node[^"]*" data-id="([^"]+)"', html)
    assert nodes == [node.id for node in window.nodes]
    assert len(nodes) == len(window.nodes) > 0
    drawn = {node.id for node in window.nodes}
    edges = re.findall(
        r'<path class="edge(?! stub)[^"]*" data-from="([^"]+)" data-to="([^"]+)"', html
    )
    assert len(edges) == sum(1 for n in window.nodes if n.parent_id in drawn)
    assert all(parent in drawn and child in drawn for parent, child in edges)
    # the active branch's messages and its label
    active = re.findall(r'<g class="node[^"]* active[^"]*" data-id="([^"]+)"', html)
    assert seeded.v3[-1] in active
    assert seeded.v2[0] not in active
    assert "⎇ main-v3" in html
    assert "⚑ before-booking" in html
    # the summary: a bracket over the drawn messages it covers, the messages still drawn
    assert re.search(r'<g class="summary" data-summary="[^"]+" data-covers="\d+">', html)
    covered = window.summaries[0].covered_ids
    assert set(covered) <= drawn
    assert seeded.main[11] in covered


def test_the_window_moves_earlier_and_later(client: TestClient, seeded: Seeded) -> None:
    html = page(client, seeded, "chat", id="trip", around=seeded.main[15], radius=3).text
    depths = [int(d) for d in re.findall(r'data-depth="(\d+)"', html)]
    assert min(depths) == 13
    assert max(depths) == 19
    earlier = re.search(r'id="earlier" href="([^"]+)"', html)
    later = re.search(r'id="later" href="([^"]+)"', html)
    assert earlier is not None
    assert later is not None
    before = client.get(earlier.group(1).replace("&amp;", "&")).text
    assert min(int(d) for d in re.findall(r'data-depth="(\d+)"', before)) < 13
    # the versions of message 11 (main's and main-v2's) stand side by side in one column
    versions = page(client, seeded, "chat", id="trip", around=seeded.v2[0], radius=1).text
    column = re.findall(r'data-id="([^"]+)" data-depth="11"', versions)
    assert set(column) == {seeded.main[10], seeded.v2[0]}


def test_clicking_a_node_shows_the_message(client: TestClient, seeded: Seeded) -> None:
    html = page(client, seeded, "chat", id="trip", around=seeded.main[15]).text
    node = re.escape(seeded.main[14])
    link = re.search(
        rf'<a href="([^"]+)" class="node-link"><g class="node[^"]*" data-id="{node}"', html
    )
    assert link is not None
    shown = client.get(link.group(1).replace("&amp;", "&")).text
    panel = re.search(
        r'<div class="panel" id="message-panel" data-id="([^"]+)">(.*?)</div>', shown, re.S
    )
    assert panel is not None
    assert panel.group(1) == seeded.main[14]
    body = panel.group(2)
    assert "turn 14: a day in Lisbon" in body
    assert set(re.findall(r'<code class="on-branch">([^<]+)</code>', body)) == {"main", "main-v3"}


def test_the_message_page_pairs_tool_calls(seeded: Seeded) -> None:
    from ctxstore.models import NewMessage

    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}},
        ],
    }  # fmt: skip
    ids = seeded.store.append(
        "trip", "main-v3",
        [NewMessage(call, metadata={"source": "test"}),
         NewMessage({"role": "tool", "tool_call_id": "call_1", "content": "sunny"})],
        expected_head=seeded.v3[-1],
    ).message_ids  # fmt: skip
    with TestClient(ctxstore.web.app(seeded.store)) as client:
        html = page(client, seeded, "message", id="trip", m=ids[0]).text
        result = page(client, seeded, "message", id="trip", m=ids[1]).text
    row = re.search(r'<tr class="tool-call">(.*?)</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r"<td>(.*?)</td>", row.group(1), re.S)
    assert cells[:2] == ["call_1", "weather"]
    assert f"m={ids[1]}" in cells[3]  # paired with its result
    assert "sunny" in cells[3]
    assert re.search(r"the result of call <code>call_1</code> \(weather\) made by", result)
    assert f"m={ids[0]}" in result
    assert "&#34;source&#34;: &#34;test&#34;" in html or "&quot;source&quot;" in html
    tokens = re.search(r"(\d+) tokens", html)
    assert tokens is not None
    assert int(tokens.group(1)) == seeded.store.state.message_tokens(call)


def test_the_context_window_page(client: TestClient, seeded: Seeded) -> None:
    full = page(client, seeded, "context", id="trip", model="gpt-4o").text
    assert "They planned three days in Lisbon." in full  # the summary first
    rows = re.findall(r"<tr><td>(user|assistant)</td>", full)
    chain = seeded.store.load_branch("trip", after_summary=True)
    assert len(rows) == len(chain.messages)
    assert 'class="mark soft"' in full
    assert 'class="mark hard"' in full
    assert "input cost $" in full
    tight = page(client, seeded, "context", id="trip", model="gpt-4o", budget=60).text
    kept = seeded.store.load_branch("trip", after_summary=True, max_tokens=60)
    assert len(re.findall(r"<tr><td>(user|assistant)</td>", tight)) == len(kept.messages)
    assert "are cut to keep within 60 tokens" in tight
    assert re.search(r'<tr class="cut" id="cut-row">.*?<td class="num">(\d+)</td>', tight)
    assert 'id="cut-row"' not in full


def test_the_summaries_page(client: TestClient, seeded: Seeded) -> None:
    html = page(client, seeded, "summaries", id="trip").text
    row = re.search(r'<tr class="summary-row">(.*?)</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert seeded.main[11] in cells[0]
    assert cells[1] == "12"  # messages covered: main's first twelve
    chain = seeded.store.get_chain("trip", seeded.main[11])
    assert int(cells[2]) == sum(seeded.store.state.message_tokens(m["message"]) for m in chain)
    assert cells[3] == "9"


def test_the_export_is_the_chats_json_lines(client: TestClient, seeded: Seeded) -> None:
    response = page(client, seeded, "export", id="trip")
    assert response.headers["content-disposition"] == 'attachment; filename="trip.jsonl"'
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert lines == list(seeded.store.export_chat("trip"))


def test_the_workers_page_reads_the_job_streams(client: TestClient, seeded: Seeded) -> None:
    html = page(client, seeded, "workers").text
    assert html.count("<tr><td>") >= 8  # one row per job stream
    assert "no worker has beaten" in html
    # A save past the soft threshold enqueues a job: pending until a worker takes it.
    seeded.store.append(
        "trip", "main-v3", [{"role": "user", "content": "and the last day?"}],
        expected_head=seeded.v3[-1], compaction=CompactionTrigger(soft_tokens=1),
    )  # fmt: skip
    pending = page(client, seeded, "workers").text
    assert re.search(r"(\d+) jobs in the streams", pending).group(1) == "1"  # type: ignore[union-attr]
    worker = ctxstore.Worker(
        seeded.url, namespaces=[seeded.namespace], compactify=lambda _messages: "A short trip.",
        heartbeat_ms=1, poll_ms=20,
    )  # fmt: skip

    def summarized() -> bool:
        return "summarized · " in page(client, seeded, "workers").text

    with running(worker, until=summarized):
        done = page(client, seeded, "workers").text
    row = re.search(
        r'<tr class="worker"><td>([^<]+)</td><td class="num">[^<]+</td><td>(.*?)</td>', done
    )
    assert row is not None
    assert row.group(2).startswith("summarized · ")
    assert ">trip</a>" in row.group(2)
    assert "no worker has beaten" in page(client, seeded, "workers").text  # it left no trace
    assert re.search(r"(\d+) pending", done).group(1) == "0"  # type: ignore[union-attr]


def test_the_workers_page_counts_the_jobs_trimmed_untaken(
    client: TestClient, seeded: Seeded
) -> None:
    assert "0 trimmed before a worker took them" in page(client, seeded, "workers").text
    keyspace = seeded.store.state.keyspace
    seeded.store.client.set(keyspace.trimmed_counter(keyspace.job_streams()[2]), 7)
    html = page(client, seeded, "workers").text
    assert '<span id="trimmed" class="badge lease">7 trimmed before a worker took them' in html
    assert '<td class="num">7</td>' in html


@pytest.mark.parametrize(
    "path",
    ["chat?id=nope", "message?id=trip&m=nope", "context?id=nope", "summaries?id=nope",
     "export?id=nope", "live?id=nope"],
)  # fmt: skip
def test_a_chat_that_does_not_exist_is_404(client: TestClient, seeded: Seeded, path: str) -> None:
    assert client.get(f"/n/{seeded.namespace}/{path}").status_code == 404


def test_nothing_outside_the_namespaces_served(seeded: Seeded) -> None:
    other = ctxstore.connect(seeded.store.client, namespace=f"{seeded.namespace}-other").admin()
    other.upsert_chat("secret", "mallory")
    other.update_chat("secret", title="Other tenant")
    with TestClient(ctxstore.web.app(seeded.store)) as client:
        assert client.get(f"/n/{seeded.namespace}-other/").status_code == 404
        assert client.get(f"/n/{seeded.namespace}/chat?id=secret").status_code == 404
        assert "Other tenant" not in client.get(f"/n/{seeded.namespace}/").text
    both = ctxstore.web.app(
        seeded.store, namespaces=[seeded.namespace, f"{seeded.namespace}-other"]
    )
    with TestClient(both) as client:
        assert "Other tenant" in client.get(f"/n/{seeded.namespace}-other/").text
        assert client.get(f"/n/{seeded.namespace}-other/chat?id=trip").status_code == 404


def test_a_token_guards_every_page(seeded: Seeded) -> None:
    with TestClient(ctxstore.web.app(seeded.store, token="t0ken")) as client:
        assert client.get(f"/n/{seeded.namespace}/").status_code == 401
        assert client.get(f"/n/{seeded.namespace}/export?id=trip").status_code == 401
        shown = client.get(f"/n/{seeded.namespace}/", headers={"Authorization": "Bearer t0ken"})
        assert "Lisbon trip" in shown.text


def test_the_workers_page_shows_dead_letters_with_their_last_error(seeded: Seeded) -> None:
    dead = seeded.store.state.keyspace.dead_letters
    seeded.store.client.xadd(
        dead, {"chat": "trip", "error": "RateLimitError: <slow down>", "attempts": 5}
    )
    with TestClient(ctxstore.web.app(seeded.store)) as client:
        html = page(client, seeded, "workers").text
    table = html[html.index('id="dead-letters"') :]
    assert "<td>trip</td><td>RateLimitError: &lt;slow down&gt;</td>" in table


def test_the_chat_page_lists_every_branch_checkpoint_and_summary_in_its_one_round_trip(
    client: TestClient, seeded: Seeded
) -> None:
    page(client, seeded, "chat", id="trip")  # the scripts are loaded once per server
    with trace_wire() as wire:
        html = page(client, seeded, "chat", id="trip").text
    assert wire.round_trips == 1  # the graph window and the lists, together
    branches = re.findall(r'<li class="branch[^"]*"><a href="([^"]+)">([^<]+)</a>', html)
    assert [name for _href, name in branches] == ["main", "main-v2", "main-v3"]
    assert all("around=" in href for href, _name in branches)
    assert re.search(r'<li class="branch active"><a [^>]+>main-v3</a>', html)
    assert "before-booking" in html.split('id="checkpoints"')[1].split("</ul>")[0]
    assert seeded.main[11] in html.split('id="summaries"')[1].split("</ul>")[0]
    centred = page(client, seeded, "chat", id="trip", around=seeded.v2[-1]).text
    assert "⎇ main-v2" in centred  # a branch's link opens the window centred on its head


def test_a_chat_of_many_branches_lists_the_first_few_hundred_and_counts_them(
    client: TestClient, seeded: Seeded
) -> None:
    store = seeded.store
    for _ in range(SHOWN + 47):
        store.create_branch("trip", seeded.main[3], activate=False)
    html = page(client, seeded, "chat", id="trip").text
    listed = html.split('id="branches"')[1].split("</ul>")[0]
    assert listed.count('<li class="branch') == SHOWN
    assert f"{SHOWN + 50} branches (the first {SHOWN} listed)" in html
