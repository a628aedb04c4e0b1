#!/usr/bin/env python3
"""Writes fuzz/seeds/TARGET/ from the recorded replies under agent-core/tests/fixtures.

Run from the repository root: `python3 fuzz/seeds.py`. The seeds are checked in; run this
again when fixtures are added. Each seed is laid out as its target reads input (see
agent-core/src/fuzzing.rs): the stream targets take the chunk size in the first byte.
"""

import json
import pathlib
import shutil
import struct
import zlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "agent-core" / "tests" / "fixtures"
SEEDS = ROOT / "fuzz" / "seeds"


def files(folder, *suffixes):
    return sorted(p for p in (FIXTURES / folder).glob("*") if p.suffix in suffixes)


def sse_of(events):
    """Server-sent events text of [(name, payload)] pairs (payload: a JSON value)."""
    out = ""
    for name, payload in events:
        if name:
            out += f"event: {name}\n"
        out += "data: " + json.dumps(payload, separators=(",", ":")) + "\n\n"
    return out.encode()


def frame(kind, name, payload):
    """One AWS event-stream message (`:message-type` kind, the type header name)."""
    type_header = ":event-type" if kind == "event" else ":exception-type"
    headers = b""
    for key, value in ((":message-type", kind), (type_header, name),
                       (":content-type", "application/json")):
        k, v = key.encode(), value.encode()
        headers += bytes([len(k)]) + k + bytes([7]) + struct.pack(">H", len(v)) + v
    body = json.dumps(payload, separators=(",", ":")).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def main():
    shutil.rmtree(SEEDS, ignore_errors=True)
    seeds = {}

    def add(target, name, data):
        seeds.setdefault(target, {})[name] = data

    for wire, folders in {
        "chat": ["openai", "azure"],
        "compatible": ["compatible", "openai"],
        "responses": ["responses"],
        "anthropic": ["anthropic"],
        "gemini": ["gemini"],
        "bedrock": ["bedrock"],
    }.items():
        for folder in folders:
            for path in files(folder, ".json", ".html"):
                add(f"{wire}_reply", f"{folder}_{path.name}", path.read_bytes())

    for wire, folders in {
        "chat": ["openai"],
        "compatible": ["compatible", "openai"],
        "responses": ["responses"],
        "anthropic": ["anthropic"],
    }.items():
        for folder in folders:
            for path in files(f"streaming/{folder}", ".sse"):
                body = path.read_bytes()
                add(f"{wire}_stream", f"{folder}_{path.name}", b"\x00" + body)
                add(f"{wire}_stream", f"{folder}_{path.stem}_split7.sse", b"\x07" + body)
                add("sse_reader", f"{folder}_{path.name}", b"\x00" + body)
                add("sse_reader", f"{folder}_{path.stem}_split3.sse", b"\x03" + body)

    # Gemini streams (`alt=sse`): each reply one chunk; a function call reply also as
    # two chunks (its parts split).
    for path in files("gemini", ".json"):
        reply = json.loads(path.read_text())
        add("gemini_stream", path.stem + ".sse", b"\x00" + sse_of([("", reply)]))
        candidates = reply.get("candidates") or []
        parts = (candidates[0].get("content") or {}).get("parts") if candidates else None
        if parts and len(parts) > 1:
            first = json.loads(json.dumps(reply))
            first["candidates"][0]["content"]["parts"] = parts[:1]
            first["candidates"][0].pop("finishReason", None)
            first.pop("usageMetadata", None)
            rest = json.loads(json.dumps(reply))
            rest["candidates"][0]["content"]["parts"] = parts[1:]
            add("gemini_stream", path.stem + "_two_chunks.sse",
                b"\x05" + sse_of([("", first), ("", rest)]))

    # Bedrock streams: events as server-sent events (the target frames each as an
    # event-stream message), and the frames themselves for the reader.
    for path in files("streaming/bedrock", ".json"):
        events = json.loads(path.read_text())
        add("bedrock_stream", path.stem + ".sse", b"\x00" + sse_of(events))
        add("bedrock_stream", path.stem + "_split9.sse", b"\x09" + sse_of(events))
        frames = b"".join(frame("event", n, p) for n, p in events)
        add("eventstream_reader", path.stem + ".bin", b"\x00" + frames)
        add("eventstream_reader", path.stem + "_split11_repair.bin", bytes([11 << 1 | 1]) + frames)
    throttled = frame("exception", "throttlingException", {"message": "Too many requests"})
    add("eventstream_reader", "exception.bin", b"\x00" + throttled)
    add("bedrock_stream", "exception.sse",
        b"\x00" + sse_of([("messageStart", {"role": "assistant"}),
                          ("exception:throttlingException", {"message": "slow down"})]))

    # The partial JSON parser: replies and arguments in pieces of 1, 5 and 64 bytes.
    for folder in ["openai", "anthropic", "gemini", "responses", "bedrock"]:
        for path in files(folder, ".json")[:4]:
            add("partial_json", f"{folder}_{path.name}", b"\x05" + path.read_bytes())
    add("partial_json", "nested.json", b"\x01" + b'{"a":[1,{"b":"c\\u00e9\\ud83d\\ude00"},-2.5e3,true,null]}')
    add("partial_json", "array.json", b"\x40" + b'[{"x": "y"}, [], {}, "\\n", 0.1]')

    # Answer texts: the shapes extraction reads (whole JSON, fenced, inline, reasoning
    # set aside, several candidates, cut off).
    answers = {
        "whole.txt": '{"city": "Paris", "confidence": 0.9}',
        "fenced.txt": 'Here you go:\n```json\n{"city": "Paris"}\n```\nHope this helps.',
        "inline.txt": 'The answer is {"city": "Paris"} as asked.',
        "think.txt": '<think>maybe {"city": "Lyon"}</think>{"city": "Paris"}',
        "two.txt": '{"city": "Paris"} or {"city": "Lyon"}',
        "cut.txt": 'Sure: {"city": "Par',
        "encoded.txt": '"{\\"city\\": \\"Paris\\"}"',
        "fence_array.txt": '```\n[1, 2, 3]\n```',
    }
    for name, text in answers.items():
        add("answer_text", name, text.encode())

    for target, named in seeds.items():
        folder = SEEDS / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in named.items():
            (folder / name).write_bytes(data)
    for target in sorted(seeds):
        print(f"{target}: {len(seeds[target])} seeds")


if __name__ == "__main__":
    main()
