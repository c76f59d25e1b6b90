"""``ctxstore functions load``: this release's library on every primary, for an operator."""

from __future__ import annotations

import json
from typing import Any

import redis

from ctxstore._core.scripts import library_name
from tests.cli.conftest import Run
from tests.support.keyspace import raw_client


def test_functions_load_loads_the_library_and_says_so(memory_url: str, run: Run) -> None:
    code, out, _err = run("--url", memory_url, "functions", "load")
    assert code == 0
    assert out.splitlines() == [f"library {library_name()}", "  server: loaded"]
    code, out, _err = run("--url", memory_url, "functions", "load", "--json")
    assert code == 0
    assert json.loads(out) == {
        "library": library_name(),
        "loaded": [],
        "present": ["server"],
        "libraries": {"server": [library_name()]},
    }


def test_functions_load_on_a_cluster_names_every_primary_and_what_it_holds(
    redis_cluster: Any, run: Run
) -> None:
    cluster = raw_client(redis_cluster.url)
    primaries = [redis.Redis(host=node.host, port=node.port) for node in cluster.get_primaries()]
    cluster.close()
    for node in primaries:
        node.function_flush()
    primaries[0].function_load("#!lua name=ctxstore_2_0000000000000000\n"
                               "redis.register_function('ctxstore_2_0000000000000000_x', "
                               "function() return 1 end)")  # fmt: skip
    code, out, _err = run("--url", redis_cluster.url, "functions", "load", "--json")
    assert code == 0
    report = json.loads(out)
    assert len(report["loaded"]) == len(primaries) == len(report["libraries"])
    held = sorted(len(names) for names in report["libraries"].values())
    assert held == [1] * (len(primaries) - 1) + [2]  # the other library is listed beside it
    code, out, _err = run("--url", redis_cluster.url, "functions", "load")
    assert code == 0
    assert "beside ctxstore_2_0000000000000000" in out
    assert out.count("already loaded") == len(primaries)
    primaries[0].function_delete("ctxstore_2_0000000000000000")
    for node in primaries:
        node.close()


def test_functions_load_refused_by_the_servers_acl_exits_1(tmp_path: Any, run: Run) -> None:
    from tests.support import servers

    with servers.acl_standalone(tmp_path, library=False) as server:
        url = f"redis://acme:change-me-acme@127.0.0.1:{server.port}/0"
        code, _out, err = run("--url", url, "--namespace", "acme", "functions", "load")
    assert code == 1
    assert "ACL refused" in err
    assert "function|load" in err.lower()
