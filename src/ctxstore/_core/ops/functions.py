"""Loading ctxstore's Redis Functions library on every primary, for an operator.

A store loads the library itself where a call finds it missing; a tenant whose ACL gives it
``FCALL`` only (``deploy/acl.conf``) cannot, and its store falls back to scripts, or fails
where scripts are refused too. ``ctxstore functions load`` (:meth:`~ctxstore.store.Store.
load_functions`) is the operator's way: it loads this release's library on each primary (on a
Cluster, each one; a replica gets it from its primary) and lists the ctxstore libraries each
then holds, so a rolling deploy shows the previous release's beside this one's.

What a node answers is read here, once for both shells; the shells only send the two commands
to each primary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore._core import failures
from ctxstore._core.format.fields import text
from ctxstore._core.protocol import WireCommand, load_command
from ctxstore._core.scripts import library_name
from ctxstore.models import FunctionsReport

#: The pattern of ctxstore's library names (``ctxstore_<format>_<hash>``).
LIBRARY_PATTERN = "ctxstore_*"


def node_commands() -> tuple[WireCommand, WireCommand]:
    """What each primary is sent, in order: the load of this release's library and the
    listing of the ctxstore libraries it holds."""
    return load_command(), ("FUNCTION", "LIST", "LIBRARYNAME", LIBRARY_PATTERN)


def functions_report(replies: Mapping[str, Sequence[Any]]) -> FunctionsReport:
    """The report of :func:`node_commands`' replies, by node. A node that refused the load
    (not because the library was there) raises its error, translated."""
    loaded, present, libraries = [], [], {}
    for node, (load, listing) in replies.items():
        if isinstance(load, BaseException):
            if not failures.is_library_present(load):
                raise failures.translate(load, {"node": node}, command="FUNCTION LOAD")
            present.append(node)
        else:
            loaded.append(node)
        if isinstance(listing, BaseException):
            raise failures.translate(listing, {"node": node}, command="FUNCTION LIST")
        libraries[node] = tuple(sorted(_library_names(listing)))
    return FunctionsReport(
        library=library_name(),
        loaded=tuple(loaded),
        present=tuple(present),
        libraries=libraries,
    )


def _library_names(listing: Any) -> list[str]:
    """The library names of a ``FUNCTION LIST`` reply (RESP2 lists or RESP3 maps)."""
    names = []
    for entry in listing or ():
        if isinstance(entry, Mapping):
            fields = {text(key): value for key, value in entry.items()}
        else:
            fields = {text(entry[i]): entry[i + 1] for i in range(0, len(entry) - 1, 2)}
        names.append(text(fields["library_name"]))
    return names
