"""What UI messages cost the save and read paths: counting a 1,000-message AI SDK chat (convert
each message to what a model takes, then count) against counting the same chat already in
chat-completions form, interleaved in one loop. No server.

``python bench/ui_codec.py [--messages N] [--iterations K]``: prints the medians and the ratio
for the tokenizer a store uses by default (tiktoken's o200k_base) and for the 4-characters
estimate (where the conversion weighs most), plus the codec alone (to_model_messages,
to_ui_messages, validate_ui_messages) per message.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path
from typing import Any

from timing import interleave, time_each

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ctxstore.messages import count_tokens
from ctxstore.messages.tokens import message_counter
from ctxstore.ui import to_model_messages, to_ui_messages, validate_ui_messages

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "rain",
    "falls",
    "on",
    "Lisbon",
    "roofs",
]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def ui_chat(count: int, seed: int = 7, tool_share: float = 0.33) -> list[dict[str, Any]]:
    """A chat as useChat sends it: user questions, answers of one or two steps, a third of them
    calling a tool (its input and output as JSON values), reasoning on some."""
    rng = random.Random(seed)
    chat: list[dict[str, Any]] = []
    for index in range(count):
        if index % 2 == 0:
            parts = [{"type": "text", "text": sentence(rng, rng.randint(10, 60))}]
            chat.append({"id": f"u{index}", "role": "user", "parts": parts})
            continue
        parts = [{"type": "step-start"}]
        if rng.random() < 0.3:
            parts.append({"type": "reasoning", "text": sentence(rng, 20)})
        if rng.random() < tool_share:
            parts.append(
                {
                    "type": "tool-search",
                    "toolCallId": f"call-{index}",
                    "state": "output-available",
                    "input": {"query": sentence(rng, 4), "limit": 5},
                    "output": {"hits": [sentence(rng, 8) for _ in range(3)]},
                }
            )
            parts.append({"type": "step-start"})
        parts.append({"type": "text", "text": sentence(rng, rng.randint(30, 150))})
        chat.append({"id": f"a{index}", "role": "assistant", "parts": parts})
    return chat


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument(
        "--tool-share", type=float, default=0.33, help="the answers that call a tool"
    )
    args = parser.parse_args()
    chat = ui_chat(args.messages, tool_share=args.tool_share)
    model = to_model_messages(chat)
    print(
        f"{len(chat)} UI messages -> {len(model)} chat-completions messages, "
        f"{count_tokens(chat)} tokens (o200k_base)"
    )
    for label, counter in (
        ("tiktoken o200k_base", message_counter(None)),
        ("estimate (4 chars a token)", message_counter("no-tokenizer-model")),
    ):
        counter(model[0])  # load the tokenizer before timing

        def count_ui(counter: Any = counter) -> int:
            return sum(counter(message) for message in chat)

        def count_model(counter: Any = counter) -> int:
            return sum(counter(message) for message in model)

        assert count_ui() == count_model()
        timed = interleave(count_ui, {"model form": count_model}, args.iterations, warmup=3)
        floor = timed.floors["model form"].median_us
        print(
            f"{label}: UI chat {timed.call.median_us / 1000:.2f} ms, model form "
            f"{floor / 1000:.2f} ms, ratio {timed.call.median_us / floor:.2f}x"
        )
    for name, call in (
        ("to_model_messages", lambda: to_model_messages(chat)),
        ("to_ui_messages", lambda: to_ui_messages(model)),
        ("validate_ui_messages", lambda: validate_ui_messages(chat)),
    ):
        stat = time_each(call, args.iterations, warmup=3)
        print(f"{name}: {stat.median_us / len(chat):.2f} us per UI message")


if __name__ == "__main__":
    main()
