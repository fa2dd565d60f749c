"""The request-validation tests' table: every class of bad field with the message it must
get (refused at submit, or on the engine thread where the model is needed), and good requests
in every accepted form. tests/engine/test_request_validation.py runs it."""

from __future__ import annotations

import math

from engine.requests import (
    MAX_DRAFT_TOKENS,
    MAX_MAX_TOKENS,
    MAX_NGRAM,
    MAX_PROMPT_CHARS,
    MAX_REPETITION_CONTEXT,
    MAX_SEED,
    MAX_STOP_LENGTH,
    MAX_STOP_STRINGS,
    MAX_TOP_K,
    GenerationRequest,
    SamplingParams,
    SpecMethod,
    SpeculativeParams,
)
from tests.engine.engine_harness import P_C, VOCAB

NAN = math.nan
LOOKUP = SpecMethod.PROMPT_LOOKUP


def sampling(**fields) -> GenerationRequest:
    return GenerationRequest(prompt_tokens=P_C, max_tokens=4, sampling=SamplingParams(**fields))


def speculative(**fields) -> GenerationRequest:
    fields.setdefault("method", LOOKUP)
    spec = SpeculativeParams(**fields)
    return GenerationRequest(prompt_tokens=P_C, max_tokens=4, speculative=spec)


def request(**fields) -> GenerationRequest:
    if "messages" not in fields:
        fields.setdefault("prompt_tokens", P_C)
    return GenerationRequest(**{"max_tokens": 4, **fields})


def chat(*messages) -> GenerationRequest:
    return GenerationRequest(messages=list(messages), max_tokens=4)


def user(content="hi", **extra) -> dict:
    return {"role": "user", "content": content, **extra}


# (name, request, the start of the expected message): every class of bad field, refused
# at submit without the model.
BAD = [
    # sampling: integers
    ("seed float", sampling(seed=1.5), "sampling.seed must be an integer, got 1.5"),
    ("seed int-valued float", sampling(seed=7.0), "sampling.seed must be an integer, got 7.0"),
    ("seed nan", sampling(seed=NAN), "sampling.seed must be an integer, got nan"),
    ("seed bool", sampling(seed=True), "sampling.seed must be an integer, got True"),
    ("seed string", sampling(seed="7"), "sampling.seed must be an integer, got '7'"),
    ("seed negative", sampling(seed=-1), f"sampling.seed must be 0 to {MAX_SEED}, got -1"),
    ("seed 2**64", sampling(seed=2**64), f"sampling.seed must be 0 to {MAX_SEED}"),
    ("top-k float", sampling(top_k=2.5), "sampling.top_k must be an integer, got 2.5"),
    ("top-k bool", sampling(top_k=False), "sampling.top_k must be an integer, got False"),
    ("top-k negative", sampling(top_k=-1), f"sampling.top_k must be 0 to {MAX_TOP_K}, got -1"),
    ("top-k huge", sampling(top_k=MAX_TOP_K + 1), "sampling.top_k must be 0 to"),
    (
        "repetition context float",
        sampling(repetition_context=2.5),
        "sampling.repetition_context must be an integer, got 2.5",
    ),
    (
        "repetition context 0",  # context[-0:] would be the whole history
        sampling(repetition_context=0),
        f"sampling.repetition_context must be 1 to {MAX_REPETITION_CONTEXT}, got 0",
    ),
    (
        "repetition context huge",
        sampling(repetition_context=MAX_REPETITION_CONTEXT + 1),
        "sampling.repetition_context must be 1 to",
    ),
    # sampling: real numbers
    ("temperature nan", sampling(temperature=NAN), "sampling.temperature must be a finite number"),
    ("temperature inf", sampling(temperature=math.inf), "sampling.temperature must be a finite"),
    ("temperature -inf", sampling(temperature=-math.inf), "sampling.temperature must be a finite"),
    ("temperature huge int", sampling(temperature=10**400), "sampling.temperature must be a fin"),
    ("temperature negative", sampling(temperature=-0.5), "sampling.temperature must be >= 0"),
    ("temperature string", sampling(temperature="0.7"), "sampling.temperature must be a number"),
    ("temperature None", sampling(temperature=None), "sampling.temperature must be a number"),
    ("temperature bool", sampling(temperature=True), "sampling.temperature must be a number"),
    ("top-p 0", sampling(top_p=0.0), "sampling.top_p must be in (0, 1], got 0.0"),
    ("top-p above 1", sampling(top_p=1.5), "sampling.top_p must be in (0, 1], got 1.5"),
    ("top-p nan", sampling(top_p=NAN), "sampling.top_p must be a finite number, got nan"),
    ("min-p 1", sampling(min_p=1.0), "sampling.min_p must be in [0, 1), got 1.0"),
    ("min-p negative", sampling(min_p=-0.1), "sampling.min_p must be in [0, 1)"),
    ("min-p nan", sampling(min_p=NAN), "sampling.min_p must be a finite number"),
    (
        "repetition penalty nan",
        sampling(repetition_penalty=NAN),
        "sampling.repetition_penalty must be a finite number, got nan",
    ),
    (
        "repetition penalty inf",
        sampling(repetition_penalty=math.inf),
        "sampling.repetition_penalty must be a finite number",
    ),
    (
        "repetition penalty 0",
        sampling(repetition_penalty=0),
        "sampling.repetition_penalty must be > 0",
    ),
    # speculative
    (
        "draft tokens float",
        speculative(draft_tokens=2.5),
        "speculative.draft_tokens must be an integer, got 2.5",
    ),
    (
        "draft tokens 0",
        speculative(draft_tokens=0),
        f"speculative.draft_tokens must be 1 to {MAX_DRAFT_TOKENS}, got 0",
    ),
    ("draft tokens 99", speculative(draft_tokens=99), "speculative.draft_tokens must be 1 to"),
    (
        "draft tokens bool",
        speculative(draft_tokens=True),
        "speculative.draft_tokens must be an int",
    ),
    (
        "draft tokens with speculation off",
        speculative(method=SpecMethod.OFF, draft_tokens=-3),
        "speculative.draft_tokens must be 1 to",
    ),
    (
        "n-gram max float",
        speculative(ngram_max=2.5),
        "speculative.ngram_max must be an integer, got 2.5",
    ),
    (
        "n-gram max 4096",  # froze the engine thread: lookup costs O(window * n) per round
        speculative(ngram_max=4096),
        f"speculative.ngram_max must be 1 to {MAX_NGRAM}, got 4096",
    ),
    ("n-gram min 0", speculative(ngram_min=0), f"speculative.ngram_min must be 1 to {MAX_NGRAM}"),
    ("n-gram min float", speculative(ngram_min=1.0), "speculative.ngram_min must be an integer"),
    (
        "n-gram min above max",
        speculative(ngram_min=5, ngram_max=2),
        "speculative.ngram_min must be <= speculative.ngram_max, got 5 > 2",
    ),
    (
        "continue_reply not a bool",
        request(continue_reply=1),
        "continue_reply must be true or false, got 1",
    ),
    (
        "method unknown",
        speculative(method="lookahead"),
        "speculative.method must be one of 'off', 'draft', 'lookup', 'auto', 'mtp', "
        "'synthetic', got 'lookahead'",
    ),
    ("method int", speculative(method=2), "speculative.method must be one of"),
    ("method None", speculative(method=None), "speculative.method must be one of"),
    # request
    ("max tokens float", request(max_tokens=1.5), "max_tokens must be an integer, got 1.5"),
    ("max tokens 0", request(max_tokens=0), f"max_tokens must be 1 to {MAX_MAX_TOKENS}, got 0"),
    ("max tokens huge", request(max_tokens=MAX_MAX_TOKENS + 1), "max_tokens must be 1 to"),
    ("max tokens string", request(max_tokens="16"), "max_tokens must be an integer, got '16'"),
    ("max tokens None", request(max_tokens=None), "max_tokens must be an integer, got None"),
    ("stop empty string", request(stop=("",)), "stop[0] must not be empty"),
    ("stop empty later", request(stop=("a", "")), "stop[1] must not be empty"),
    (
        "stop a bare string",
        request(stop="\n"),
        "stop must be a tuple or list of strings, got a str",
    ),
    ("stop None", request(stop=None), "stop must be a tuple or list of strings, got None"),
    ("stop not text", request(stop=(1,)), "stop[0] must be a string, got 1"),
    (
        "stop too many",
        request(stop=tuple(f"<{i}>" for i in range(MAX_STOP_STRINGS + 1))),
        f"stop holds {MAX_STOP_STRINGS + 1} strings; the most is {MAX_STOP_STRINGS}",
    ),
    (
        "stop too long",
        request(stop=("x" * (MAX_STOP_LENGTH + 1),)),
        f"stop[0] is {MAX_STOP_LENGTH + 1} characters long; the most is {MAX_STOP_LENGTH}",
    ),
    (
        "stop lone surrogate",
        request(stop=("ok", "a\udc80")),
        "stop[1] cannot be encoded as UTF-8: character 1 is U+DC80, a lone surrogate",
    ),
    ("request id empty", request(request_id=""), "request_id must not be empty"),
    ("request id int", request(request_id=5), "request_id must be a string, got 5"),
    ("request id too long", request(request_id="r" * 1000), "request_id is 1000 characters"),
    ("sampling None", request(sampling=None), "sampling must be a SamplingParams, got None"),
    (
        "sampling dict",
        request(sampling={"seed": 1}),
        "sampling must be a SamplingParams, got a dict",
    ),
    ("speculative None", request(speculative=None), "speculative must be a SpeculativeParams"),
    (
        "not a request",
        {"prompt_tokens": P_C},
        "the request must be a GenerationRequest, got a dict",
    ),
    # prompt
    ("neither", GenerationRequest(), "the request has neither messages nor prompt_tokens"),
    (
        "both",
        request(messages=[user()], prompt_tokens=P_C),
        "give either messages or prompt_tokens",
    ),
    ("prompt tokens empty", request(prompt_tokens=[]), "prompt_tokens is empty"),
    ("prompt tokens float", request(prompt_tokens=[5, 6.0]), "prompt_tokens[1] must be an integer"),
    ("prompt tokens bool", request(prompt_tokens=[True]), "prompt_tokens[0] must be an integer"),
    ("prompt tokens negative", request(prompt_tokens=[5, -1]), "prompt_tokens[1] must be >= 0"),
    (
        "prompt tokens string",
        request(prompt_tokens="hello"),
        "prompt_tokens must be a list of token",
    ),
    ("messages a string", request(messages="hello"), "messages must be a list of {'role'"),
    ("messages a dict", request(messages=user()), "messages must be a list of {'role'"),
    ("messages empty", chat(), "messages is empty"),
    ("message a string", chat("hello"), "messages[0] must be a dict with 'role' and 'content'"),
    ("message role unknown", chat(user(), {"role": "robot", "content": "x"}), "messages[1].role"),
    ("message role missing", chat({"content": "x"}), "messages[0] has no 'role'"),
    ("message role not text", chat({"role": 1, "content": "x"}), "messages[0].role must be a str"),
    ("message content missing", chat({"role": "user"}), "messages[0] has no 'content'"),
    ("message content None", chat(user(None)), "messages[0].content must be a string, got None"),
    ("message content list", chat(user(["hi"])), "messages[0].content must be a string"),
    (
        "message lone surrogate",
        chat(user("caf\ud800")),
        "messages[0].content cannot be encoded as UTF-8: character 3 is U+D800",
    ),
    ("message extra key not text", chat(user(name=3)), "messages[0].name must be a string, got 3"),
    (
        "messages too long",
        chat(user("x" * (MAX_PROMPT_CHARS // 2)), user("y" * (MAX_PROMPT_CHARS // 2))),
        "messages hold",
    ),
]

# Checks that need the model: refused on the engine thread when the request is admitted.
BAD_FOR_THE_MODEL = [
    (
        "prompt token outside the vocabulary",
        request(prompt_tokens=[5, VOCAB, 9]),
        f"prompt_tokens[1] is {VOCAB}, outside the vocabulary (0..{VOCAB - 1})",
    ),
    (
        "top-k the whole vocabulary",
        sampling(temperature=0.7, top_k=VOCAB),
        f"sampling.top_k must be 0 (off) to {VOCAB - 1} for this model's vocabulary",
    ),
    (
        "draft without a draft model",
        speculative(method="draft"),
        "speculative.method 'draft' needs a draft model: name one in speculative.draft_model",
    ),
]

GOOD = [
    ("method as a string", speculative(method="lookup")),
    ("auto by name", speculative(method="auto", ngram_min=MAX_NGRAM, ngram_max=MAX_NGRAM)),
    ("seed bounds", sampling(temperature=0.5, seed=MAX_SEED)),
    ("seed 0", sampling(temperature=0.5, seed=0)),
    ("integer temperature", sampling(temperature=1, top_p=1, repetition_penalty=2)),
    ("stop as a list", request(stop=["</s>", "x" * MAX_STOP_LENGTH])),
    ("prompt tokens as a tuple", request(prompt_tokens=tuple(P_C))),
    ("messages as a tuple", request(messages=(user(), {"role": "assistant", "content": ""}))),
    ("message with a name", chat(user("hi", name="ann"))),
    ("non-BMP text", chat(user("rocket 🚀, 数字"))),
]
