"""Draft-model speculation through the server: `tandem serve --draft-model` drafts for requests
that ask for "draft", and a request may name the loaded draft model; the text still equals
mlx_lm.generate's at temperature 0."""

from __future__ import annotations

import openai
import pytest

from tests.server.server_harness import ServerThread
from tests.tiny_models import make_tiny_llama_dir

MAX_TOKENS = 20
MESSAGES = [{"role": "user", "content": "Repeat after me: red, green, blue."}]


@pytest.fixture(scope="module")
def drafted(tiny_dir, tmp_path_factory):
    draft = make_tiny_llama_dir(tmp_path_factory.mktemp("server-draft"), seed=7, num_layers=1)
    harness = ServerThread(tiny_dir, draft_model=str(draft))
    server = harness.serve()
    yield harness, server, draft
    harness.close(server)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_draft_model_speculation_equals_mlx_lm_generate(drafted, reference, stream):
    harness, server, draft = drafted
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=60)
    rounds = harness.engine.stats().spec.rounds
    for speculative in (
        {"method": "draft", "draft_tokens": 3},
        {"method": "draft", "draft_tokens": 2, "draft_model": draft.name},
    ):
        args = dict(
            model="",
            messages=MESSAGES,
            max_tokens=MAX_TOKENS,
            temperature=0,
            extra_body={"speculative": speculative},
        )
        if stream:
            text = "".join(
                c.choices[0].delta.content or ""
                for c in client.chat.completions.create(stream=True, **args)
                if c.choices
            )
        else:
            text = client.chat.completions.create(**args).choices[0].message.content
        assert text == reference.chat(MESSAGES, MAX_TOKENS)[0]
    assert harness.engine.stats().spec.rounds > rounds  # the draft model did draft


def test_an_unknown_draft_model_is_a_400(drafted):
    _, server, _ = drafted
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=60)
    with pytest.raises(openai.BadRequestError, match="does not exist") as refused:
        client.chat.completions.create(
            model="",
            messages=MESSAGES,
            max_tokens=4,
            extra_body={"speculative": {"method": "draft", "draft_model": "/tmp/elsewhere"}},
        )
    assert refused.value.body["param"] == "speculative"
