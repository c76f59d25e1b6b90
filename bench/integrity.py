"""After concurrent writers: is every acknowledged message on the chain exactly once?

Throughput means nothing if messages were lost or stored twice to get it. The check reads the
chat back through the public API:

* lost: acknowledged (its id came back from ``append``) but not on the branch's chain;
* duplicated: an id on the chain twice, or one writer's payload stored under two ids;
* orphaned: a message of ``get_graph`` that is on no branch's chain (reachable from nothing);
* unexpected: messages in the graph beyond those acknowledged (a retried write stored twice).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from workload import USER_ID


@dataclass(frozen=True)
class Integrity:
    lost: int
    duplicated: int
    orphaned: int
    unexpected: int
    on_chain: int
    acknowledged: int

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.orphaned or self.unexpected)

    def __add__(self, other: Integrity) -> Integrity:
        return Integrity(
            self.lost + other.lost,
            self.duplicated + other.duplicated,
            self.orphaned + other.orphaned,
            self.unexpected + other.unexpected,
            self.on_chain + other.on_chain,
            self.acknowledged + other.acknowledged,
        )


EMPTY = Integrity(0, 0, 0, 0, 0, 0)


def _excess(counts: Counter[str]) -> int:
    return sum(count - 1 for count in counts.values() if count > 1)


def check_chat(store: Any, chat_id: str, acknowledged: Iterable[str]) -> Integrity:
    """Compare the ids acknowledged to the writers with what the chat holds now."""
    acked = list(acknowledged)
    chain = store.load_branch(chat_id, "main", user_id=USER_ID).messages
    chain_ids = Counter(item["id"] for item in chain)
    payloads = Counter(item["message"]["content"] for item in chain)
    graph = store.get_graph(chat_id, user_id=USER_ID)
    reachable: set[str] = set()
    for branch in graph.branches:
        if branch.head_message_id is not None:
            reachable.update(
                item["id"]
                for item in store.get_chain(chat_id, branch.head_message_id, user_id=USER_ID)
            )
    nodes = {node.id for node in graph.messages}
    return Integrity(
        lost=sum(1 for message_id in set(acked) if message_id not in chain_ids),
        duplicated=_excess(chain_ids) + _excess(payloads) + _excess(Counter(acked)),
        orphaned=len(nodes - reachable),
        unexpected=max(0, len(nodes) - len(set(acked))),
        on_chain=len(chain),
        acknowledged=len(acked),
    )
