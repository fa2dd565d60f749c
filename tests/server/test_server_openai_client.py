"""The official openai client against a real server on a real engine (a tiny random model):
at temperature 0 the text equals what mlx_lm.generate produces alone, streamed or not, with
speculation or without, one client or eight at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

MAX_TOKENS = 24
LOOKUP = {"method": "lookup", "draft_tokens": 4, "ngram_min": 1, "ngram_max": 3}


def client_for(server, api_key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key=api_key, max_retries=0, timeout=60)


def conversation(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You repeat things."},
        {"role": "user", "content": f"Say the numbers {i}, {i + 1}, {i + 2} and {i} again."},
    ]


def chat(client: openai.OpenAI, messages, *, stream: bool, speculative=None, **kw):
    """(text, finish_reason, usage) of one chat completion."""
    extra = {"speculative": speculative} if speculative else None
    common = dict(
        model=kw.pop("model", None) or served_name(client),
        messages=messages,
        temperature=0,
        extra_body=extra,
        **kw,
    )
    if not stream:
        reply = client.chat.completions.create(**common)
        choice = reply.choices[0]
        assert choice.message.role == "assistant"
        return choice.message.content, choice.finish_reason, reply.usage
    pieces, finish, usage = [], None, None
    for chunk in client.chat.completions.create(
        stream=True, stream_options={"include_usage": True}, **common
    ):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    return "".join(pieces), finish, usage


_NAMES: dict[str, str] = {}


def served_name(client: openai.OpenAI) -> str:
    key = str(client.base_url)
    if key not in _NAMES:
        _NAMES[key] = client.models.list().data[0].id
    return _NAMES[key]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("speculative", [None, LOOKUP], ids=["plain", "lookup"])
def test_chat_equals_mlx_lm_generate(served, reference, stream, speculative):
    harness, server, _ = served
    rounds = harness.engine.stats().spec.rounds
    messages = conversation(3)
    text, finish, usage = chat(
        client_for(server), messages, stream=stream, speculative=speculative, max_tokens=MAX_TOKENS
    )
    expected, count = reference.chat(messages, MAX_TOKENS)
    assert text == expected
    assert finish == ("length" if count == MAX_TOKENS else "stop")
    assert usage.completion_tokens == count
    assert usage.prompt_tokens > 0 and usage.total_tokens == usage.prompt_tokens + count
    if speculative:  # the row did speculate: prompt lookup drafted tokens and they were checked
        assert harness.engine.stats().spec.rounds > rounds


def test_eight_clients_at_once(served, reference):
    _, server, _ = served
    client = client_for(server)
    served_name(client)

    def one(i: int):
        messages = conversation(10 + i)
        result = chat(
            client,
            messages,
            stream=i % 2 == 0,
            speculative=LOOKUP if i % 3 else None,
            max_tokens=MAX_TOKENS + i,
        )
        return result, reference.chat(messages, MAX_TOKENS + i)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    for (text, _, usage), (expected, count) in results:
        assert text == expected
        assert usage.completion_tokens == count


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_completions_text_and_token_prompts(served, reference, stream):
    _, server, _ = served
    client = client_for(server)
    prompt = "Once upon a time, the numbers were 1, 2, 3"
    expected, count = reference.completion(prompt, MAX_TOKENS)
    token_prompt = reference.tokenizer.encode(prompt)
    for given in (prompt, token_prompt):
        args = dict(
            model=served_name(client),
            prompt=given,
            max_tokens=MAX_TOKENS,
            temperature=0,
            extra_body={"speculative": LOOKUP},
        )
        if stream:
            text = "".join(
                c.choices[0].text
                for c in client.completions.create(stream=True, **args)
                if c.choices
            )
        else:
            reply = client.completions.create(**args)
            text = reply.choices[0].text
            assert reply.usage.completion_tokens == count
            assert reply.usage.prompt_tokens == len(token_prompt)
        assert text == expected


def test_stop_strings_end_the_reply_before_them(served, reference):
    _, server, _ = served
    messages = conversation(5)
    expected, _ = reference.chat(messages, MAX_TOKENS)
    stop = expected[len(expected) // 2 : len(expected) // 2 + 3]
    assert stop.strip(), expected
    for stream in (False, True):
        text, finish, _ = chat(
            client_for(server), messages, stream=stream, stop=[stop], max_tokens=MAX_TOKENS
        )
        assert text == expected[: expected.index(stop)]
        assert finish == "stop"


def test_seed_makes_sampling_repeatable(served):
    _, server, _ = served
    client = client_for(server)
    messages = conversation(7)
    args = dict(
        model=served_name(client),
        messages=messages,
        max_tokens=16,
        temperature=0.9,
        top_p=0.95,
        seed=1234,
    )
    first = client.chat.completions.create(**args).choices[0].message.content
    again = client.chat.completions.create(**args).choices[0].message.content
    other = client.chat.completions.create(**{**args, "seed": 99}).choices[0].message.content
    assert first == again
    assert first != other


def test_models_lists_the_served_model(served, tiny_dir):
    harness, server, _ = served
    ids = [m.id for m in client_for(server).models.list().data]
    assert ids[0] == harness.engine.stats().model.name == tiny_dir.name
    assert client_for(server).models.retrieve(ids[0]).id == ids[0]


def test_api_key_guards_the_guarded_server(served, reference):
    from tests.server.conftest import API_KEY

    _, _, guarded = served
    with pytest.raises(openai.AuthenticationError):
        client_for(guarded, "wrong").models.list()
    messages = conversation(2)
    text, _, _ = chat(client_for(guarded, API_KEY), messages, stream=True, max_tokens=8)
    assert text == reference.chat(messages, 8)[0]
