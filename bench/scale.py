"""How much each scenario does in a full, quick or smoke run.

Iterations shrink with the chain length so that every length costs about the same wall time:
a 10,000-message read takes a thousand times longer than a 10-message one, and a fixed count
would either starve the short chains of samples or make the long ones take minutes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """Sizes and iteration counts for one kind of run."""

    name: str
    #: Chain lengths N of the save, cold-read and warm-read scenarios.
    lengths: tuple[int, ...]
    #: Timed saves per length (each interleaved with its floors).
    save_iterations: int
    #: Timed reads per length; a read of N messages costs about N times a short one.
    read_iterations: dict[int, int]
    #: Chain length of the cluster, embedded-store and peer scenarios.
    side_length: int
    #: Timed iterations at ``side_length`` for those scenarios.
    side_iterations: int
    #: Chain read in one call for the longest-Redis-call probe, and how many reads.
    long_read_length: int
    long_reads: int
    #: Appends of ``long_append_size`` messages in one call (the first ones build the long chain).
    long_append_size: int
    long_appends: int
    #: Writer processes (the throughput plot's x axis), appends per writer, rounds (medians).
    writer_counts: tuple[int, ...]
    appends_per_writer: int
    writer_repeats: int
    #: Messages the memory probe stores, in appends of ``memory_batch``.
    memory_messages: int
    memory_batch: int
    #: Fresh interpreters per command in the start-up probe.
    import_runs: int
    #: Blocks per kind of the Redis-time A/B (bench/redis_time.py).
    redis_time_blocks: int = 15

    def warmup(self, iterations: int) -> int:
        """Untimed calls before a timed loop: a tenth of it, at least three."""
        return max(3, iterations // 10)


FULL = Scale(
    name="full",
    lengths=(10, 100, 1_000, 10_000),
    save_iterations=1_000,
    read_iterations={10: 1_000, 100: 1_000, 1_000: 300, 10_000: 60},
    side_length=1_000,
    side_iterations=300,
    long_read_length=100_000,
    long_reads=5,
    long_append_size=10_000,
    long_appends=10,
    writer_counts=(1, 2, 4, 8),
    appends_per_writer=300,
    writer_repeats=9,
    memory_messages=10_000,
    memory_batch=100,
    import_runs=20,
)

QUICK = Scale(
    name="quick",
    lengths=(10, 100, 1_000, 10_000),
    save_iterations=200,
    read_iterations={10: 200, 100: 200, 1_000: 50, 10_000: 10},
    side_length=1_000,
    side_iterations=50,
    long_read_length=10_000,
    long_reads=3,
    long_append_size=10_000,
    long_appends=2,
    writer_counts=(1, 2, 4, 8),
    appends_per_writer=100,
    writer_repeats=5,
    memory_messages=10_000,
    memory_batch=100,
    import_runs=5,
    redis_time_blocks=5,
)

#: For the test suite: every scenario runs, at sizes that only prove it works.
SMOKE = Scale(
    name="smoke",
    lengths=(10, 100, 1_000),
    save_iterations=20,
    read_iterations={10: 20, 100: 20, 1_000: 5},
    side_length=1_000,
    side_iterations=5,
    long_read_length=1_000,
    long_reads=2,
    long_append_size=1_000,
    long_appends=1,
    writer_counts=(1, 2),
    appends_per_writer=10,
    writer_repeats=1,
    memory_messages=1_000,
    memory_batch=100,
    import_runs=2,
    redis_time_blocks=2,
)
