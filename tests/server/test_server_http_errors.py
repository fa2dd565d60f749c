"""Raw HTTP against the server: malformed requests get OpenAI-style errors with a message, a
client that goes away cancels its request at once, and no bad request disturbs a good one."""

from __future__ import annotations

import http.client
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest

from tests.server.conftest import API_KEY, SMALL_BODY_BYTES

CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Hello there"}]


def post(server, path: str, body, *, headers=None) -> tuple[int, dict]:
    """(status, JSON body) of one POST; `body` as bytes is sent as it is."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, raw, {"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data)


def error_of(server, body, *, path=CHAT, status=400, headers=None) -> dict:
    got, data = post(server, path, body, headers=headers)
    assert got == status, data
    error = data["error"]
    assert isinstance(error["message"], str) and error["message"]
    return error


def test_malformed_json_is_a_400(served):
    _, server, _ = served
    assert "not valid JSON" in error_of(server, b'{"messages": [')["message"]
    assert "not valid JSON" in error_of(server, b"\xff\xfe")["message"]
    assert "JSON object" in error_of(server, [1, 2])["message"]
    assert "no body" in error_of(server, b"")["message"]


@pytest.mark.parametrize(
    "fields, param, words",
    [
        ({"temperature": -1}, "temperature", "temperature must be >= 0"),
        ({"top_p": 2}, "top_p", "top_p must be in (0, 1]"),
        ({"max_tokens": 0}, "max_tokens", "max_tokens must be 1 to"),
        ({"max_tokens": "ten"}, "max_tokens", "max_tokens must be an integer"),
        ({"seed": -5}, "seed", "seed must be 0 to"),
        ({"stop": [""]}, "stop", "stop[0] must not be empty"),
        ({"n": 2}, "n", "n must be 1"),
        ({"logprobs": True}, "logprobs", "not supported"),
        ({"stream": "yes"}, "stream", "stream must be true or false"),
        ({"speculative": {"method": "magic"}}, "speculative.method", "must be one of"),
        ({"speculative": {"colour": 1}}, "speculative", "unknown field(s) colour"),
        ({"speculative": {"method": "lookup", "ngram_min": 5, "ngram_max": 2}}, None, "<="),
        ({"messages": []}, "messages", "messages is empty"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages", "role must be one of"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages",
            "text only",
        ),
    ],
)
def test_bad_parameters_name_the_field(served, fields, param, words):
    _, server, _ = served
    error = error_of(server, {"messages": MESSAGES, **fields})
    assert words in error["message"]
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param


def test_unknown_model_is_a_400_with_its_code(served):
    _, server, _ = served
    error = error_of(server, {"model": "no-such-model", "messages": MESSAGES})
    assert error["code"] == "model_not_found" and "no-such-model" in error["message"]
    error = error_of(server, {"model": "/etc", "prompt": "hi"}, path="/v1/completions")
    assert error["code"] == "model_not_found"


def test_prompt_longer_than_the_context_is_a_400_streamed_or_not(served):
    _, server, _ = served
    long_prompt = list(range(100, 2200))  # the tiny model's context is 2048
    for stream in (False, True):
        error = error_of(server, {"prompt": long_prompt, "stream": stream}, path="/v1/completions")
        assert "context" in error["message"]


def test_unknown_route_and_method_are_json(served):
    _, server, _ = served
    assert error_of(server, {}, path="/v1/embeddings", status=404)["message"]
    assert post(server, "/v1/models", {})[0] == 405


def test_api_key_is_required_when_set(served):
    _, _, guarded = served
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}):
        error = error_of(
            guarded, {"messages": MESSAGES, "max_tokens": 2}, status=401, headers=headers
        )
        assert error["code"] == "invalid_api_key"
    status, data = post(
        guarded,
        CHAT,
        {"messages": MESSAGES, "max_tokens": 2},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert status == 200 and data["choices"][0]["message"]["role"] == "assistant"


def test_too_large_body_is_a_413(served):
    _, _, guarded = served
    body = {"messages": [{"role": "user", "content": "x" * (SMALL_BODY_BYTES * 2)}]}
    error = error_of(guarded, body, status=413, headers={"Authorization": f"Bearer {API_KEY}"})
    assert str(SMALL_BODY_BYTES) in error["message"]


def _running(harness) -> int:
    stats = harness.engine.stats()
    return stats.running + stats.waiting


def _wait(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_disconnect_cancels_the_request_at_once(served, stream):
    harness, server, _ = served
    cancelled = server.stats.cancelled
    parts = urlsplit(server.url)
    body = json.dumps(
        {"messages": MESSAGES, "max_tokens": 100000, "stream": stream, "temperature": 0}
    ).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    sock.sendall(
        f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    assert _wait(lambda: _running(harness) == 1), "the request never started"
    if stream:
        assert b"data: " in sock.recv(4096)  # tokens are flowing
    generated = harness.engine.stats().generated_tokens
    sock.close()
    assert _wait(lambda: _running(harness) == 0, 5.0), "the request kept running"
    assert _wait(lambda: server.stats.cancelled == cancelled + 1)
    # it stopped long before the context (2048 tokens) was full
    assert harness.engine.stats().generated_tokens - generated < 1000


def test_bad_requests_do_not_disturb_a_good_one(served, reference):
    _, server, _ = served
    messages = [{"role": "user", "content": "Count with me: one two three"}]
    bad_bodies = [
        b"{",
        {"messages": MESSAGES, "top_p": 9},
        {"model": "x", "messages": MESSAGES},
        {"prompt": list(range(100, 2200))},
    ]

    def good():
        return post(server, CHAT, {"messages": messages, "max_tokens": 30, "temperature": 0})

    def bad(i: int):
        path = "/v1/completions" if i % 4 == 3 else CHAT
        return post(server, path, bad_bodies[i % 4])[0]

    with ThreadPoolExecutor(6) as pool:
        good_future = pool.submit(good)
        statuses = list(pool.map(bad, range(12)))
        status, data = good_future.result()
    assert statuses == [400] * 12
    assert status == 200
    assert data["choices"][0]["message"]["content"] == reference.chat(messages, 30)[0]
