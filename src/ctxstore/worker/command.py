"""``ctxstore worker``: run the compaction worker, check for a live one, or list dead letters.

``ctxstore worker --url URL [--namespace NS ...] [--concurrency N] [--burst]
[--summary-model MODEL]`` works until SIGTERM (or, with ``--burst``, until no job is left);
``--live`` exits 0 when the worker process on this machine (the one keeping ``--live-file``)
turned its loop within 3 times its poll interval, asking no Redis (a pod's liveness probe);
``--ready`` exits 0 when Redis answers (a pod's readiness probe); ``--check`` exits 0 when any
worker's heartbeat exists in Redis and 1 otherwise (a fleet-wide check, not a pod's probe);
``--dead-letters`` prints the jobs that failed for good, one JSON object a line. The URL and
namespaces come from the command's own options, else the global ``ctxstore --url`` /
``--namespace``, else ``CTXSTORE_URL``; the summary model from ``--summary-model``, else
``CTXSTORE_SUMMARY_MODEL``. Logs are JSON lines on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

#: The worker's sweep: how often, and the pause between its steps (as ``Worker``'s defaults).
DEFAULT_SWEEP_EVERY_MS = 15 * 60 * 1000
DEFAULT_SWEEP_PAUSE_MS = 10

#: The environment variables the command reads (the deploy/ files set them).
URL_ENV = "CTXSTORE_URL"
#: The key directory of a LocalKeyProvider, for stores with encryption (``--keys``).
KEYS_ENV = "CTXSTORE_KEYS"


def key_provider(args: argparse.Namespace) -> Any:
    """The key provider ``--keys`` (else ``CTXSTORE_KEYS``) names: a LocalKeyProvider on an
    existing key directory (a mistyped path is an error, not a new empty one), or None (a
    store without encryption)."""
    path = getattr(args, "keys", None) or os.environ.get(KEYS_ENV)
    if not path:
        return None
    from ctxstore.crypto import LocalKeyProvider

    return LocalKeyProvider.existing(path)


SUMMARY_MODEL_ENV = "CTXSTORE_SUMMARY_MODEL"
CONCURRENCY_ENV = "CTXSTORE_WORKER_CONCURRENCY"
NAMESPACES_ENV = "CTXSTORE_NAMESPACES"
#: Where the worker keeps its liveness file (as ``ctxstore.worker.liveness`` reads it).
LIVE_FILE_ENV = "CTXSTORE_WORKER_LIVE_FILE"


def add_worker_command(commands: Any, positive_int: Any) -> None:
    """The ``worker`` subcommand on the CLI's subparsers."""
    worker = commands.add_parser(
        "worker", help="run the compaction worker (or --check for a live one, --dead-letters)"
    )
    worker.add_argument("--url", dest="worker_url", default=None, help="store URL")
    worker.add_argument(
        "--namespace",
        dest="worker_namespaces",
        action="append",
        default=None,
        help="a namespace to serve (repeatable; default: the default namespace, or "
        f"${NAMESPACES_ENV}, comma-separated)",
    )
    worker.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        help=f"jobs at once (default 4, or ${CONCURRENCY_ENV})",
    )
    worker.add_argument("--burst", action="store_true", help="drain the jobs, then exit")
    worker.add_argument(
        "--summary-model",
        default=None,
        help=f"the litellm model that writes summaries (default ${SUMMARY_MODEL_ENV})",
    )
    worker.add_argument("--max-attempts", type=positive_int, default=3)
    worker.add_argument(
        "--claim-idle-ms",
        type=positive_int,
        default=60_000,
        help="take over a job another worker left idle this long (its worker died)",
    )
    worker.add_argument(
        "--job-timeout-ms",
        type=positive_int,
        default=600_000,
        help="how long one job may hold its chat (keep below the grace period on SIGTERM)",
    )
    worker.add_argument(
        "--sweep-every-ms",
        type=int,
        default=DEFAULT_SWEEP_EVERY_MS,
        help="sweep the listing indexes and owner records of gone chats this often, one "
        "worker of a namespace at a time (0: never; default 15 minutes)",
    )
    worker.add_argument(
        "--sweep-pause-ms",
        type=int,
        default=DEFAULT_SWEEP_PAUSE_MS,
        help="the pause between two bounded steps of a sweep (default 10)",
    )
    worker.add_argument(
        "--live-file",
        default=None,
        help=f"the file the worker keeps for --live (default ${LIVE_FILE_ENV}, else "
        "ctxstore-worker.live in the temporary folder)",
    )
    mode = worker.add_mutually_exclusive_group()
    mode.add_argument(
        "--live",
        action="store_true",
        help="exit 0 when this machine's worker turned its loop lately (no Redis call)",
    )
    mode.add_argument("--ready", action="store_true", help="exit 0 when Redis answers")
    mode.add_argument(
        "--check", action="store_true", help="exit 0 when any worker's heartbeat exists"
    )
    mode.add_argument(
        "--dead-letters", action="store_true", help="print the jobs that failed for good"
    )
    worker.set_defaults(handler=run_worker_command)


def _namespaces(args: argparse.Namespace) -> list[str | None]:
    chosen = args.worker_namespaces
    if not chosen and args.namespace:
        chosen = [args.namespace]
    if not chosen and os.environ.get(NAMESPACES_ENV):
        chosen = [name.strip() for name in os.environ[NAMESPACES_ENV].split(",") if name.strip()]
    return list(chosen) if chosen else [None]


def run_worker_command(args: argparse.Namespace) -> int:
    from ctxstore.worker.liveness import check_live, default_live_file

    live_file = args.live_file or default_live_file()
    if args.live:  # before anything heavy is imported: the probe runs every few seconds
        found = check_live(live_file)
        if not found.live:
            print(f"ctxstore worker: not live: {found.reason}", file=sys.stderr)
        return 0 if found.live else 1
    from ctxstore.worker import Worker, list_dead_letters, worker_alive, worker_ready

    url = args.worker_url or args.url or os.environ.get(URL_ENV)
    namespaces = _namespaces(args)
    if args.ready:
        ready, reason = worker_ready(url, namespaces=namespaces)
        if not ready:
            print(f"ctxstore worker: not ready: {reason}", file=sys.stderr)
        return 0 if ready else 1
    if args.check:
        return 0 if worker_alive(url, namespaces=namespaces) else 1
    if args.dead_letters:
        for namespace in namespaces:
            for letter in list_dead_letters(url, namespace=namespace):
                print(json.dumps({"namespace": namespace, **letter}, sort_keys=True))
        return 0
    concurrency = args.concurrency or int(os.environ.get(CONCURRENCY_ENV) or 4)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    worker = Worker(
        url,
        namespaces=namespaces,
        summary_model=args.summary_model or os.environ.get(SUMMARY_MODEL_ENV),
        concurrency=concurrency,
        max_attempts=args.max_attempts,
        claim_idle_ms=args.claim_idle_ms,
        job_timeout_ms=args.job_timeout_ms,
        sweep_every_ms=args.sweep_every_ms,
        sweep_pause_ms=args.sweep_pause_ms,
        live_file=live_file,
        encryption=key_provider(args),
    )
    stats = worker.run(burst=args.burst)
    logging.getLogger("ctxstore.worker").info(
        json.dumps(
            {
                "event": "stopped",
                "summarized": stats.summarized,
                "skipped": stats.skipped,
                "dead_lettered": stats.dead_lettered,
            }
        )
    )
    return 0
