"""The store, settings, export and small helpers: no Qt event loop, no model."""

from __future__ import annotations

import sqlite3

from app.chat.draft_spans import merge, split_delta
from app.latency import percentile
from app.settings.chat_settings import ChatSettings
from app.store.conversation_store import Store
from app.store.export import to_markdown
from app.store.records import Conversation, Message, MessageStatus, Role
from engine.requests import SpecMethod


def test_store_uses_wal_in_the_data_dir(store, data_dir):
    assert store.journal_mode == "wal"
    assert store.path.parent == data_dir


def test_conversations_and_messages_round_trip(store):
    settings = ChatSettings(temperature=0.3, spec_method="lookup", draft_tokens=6, seed=7)
    conv = store.create_conversation(
        Conversation(title="Hello", system_prompt="Be brief", settings=settings)
    )
    user = store.add_message(conv.id, Message(role=Role.USER, content="hi"))
    reply = store.add_message(
        conv.id, Message(role=Role.ASSISTANT, content="", status=MessageStatus.GENERATING)
    )
    store.update_message(
        reply.id,
        content="hey there",
        status=MessageStatus.DONE,
        draft_spans=[(0, 3)],
        stats={"generated_tokens": 2},
    )
    again = store.conversation(conv.id)
    assert again.title == "Hello" and again.system_prompt == "Be brief"
    assert again.settings == settings
    messages = store.messages(conv.id)
    assert [m.content for m in messages] == ["hi", "hey there"]
    assert messages[1].draft_spans == [(0, 3)] and messages[1].stats == {"generated_tokens": 2}
    assert messages[1].parent_id == user.id and messages[0].parent_id is None


def test_generating_replies_become_interrupted_on_open(data_dir):
    path = data_dir / "db.sqlite3"
    first = Store(path)
    conv = first.create_conversation(Conversation())
    msg = first.add_message(
        conv.id, Message(role=Role.ASSISTANT, content="partial", status=MessageStatus.GENERATING)
    )
    first._db.close()  # like a crash: no clean shutdown
    second = Store(path)
    assert second.recovered == 1
    assert second.message(msg.id).status is MessageStatus.INTERRUPTED
    assert second.message(msg.id).content == "partial"
    second.close()


def test_search_finds_titles_and_text(store):
    a = store.create_conversation(Conversation(title="Rust lifetimes"))
    store.add_message(a.id, Message(role=Role.USER, content="What does 'a mean?"))
    b = store.create_conversation(Conversation(title="Cooking"))
    store.add_message(b.id, Message(role=Role.USER, content="How long do I boil pasta_al_dente?"))
    assert [s.id for s in store.list_conversations("rust")] == [a.id]
    hits = store.list_conversations("pasta_al")
    assert [s.id for s in hits] == [b.id] and "pasta_al_dente" in hits[0].snippet
    assert store.list_conversations("100%") == []  # LIKE wildcards are escaped
    assert {s.id for s in store.list_conversations("")} == {a.id, b.id}
    store.delete_conversation(b.id)
    assert [s.id for s in store.list_conversations("")] == [a.id]


def test_settings_and_defaults(store):
    assert store.setting("missing", 5) == 5
    store.set_setting("model_dirs", ["/a", "/b"])
    assert store.setting("model_dirs") == ["/a", "/b"]
    defaults = ChatSettings(max_tokens=99, spec_method=SpecMethod.AUTO.value)
    store.set_default_chat_settings(defaults)
    assert store.default_chat_settings() == defaults


def test_chat_settings_normalise_and_map_to_the_engine():
    s = ChatSettings.from_dict({"temperature": "0.5", "draft_tokens": 99, "ngram_min": 5, "ngram_max": 2,
                                "spec_method": "bogus", "seed": "", "unknown": 1})  # fmt: skip
    assert s.temperature == 0.5 and s.draft_tokens == 16 and s.ngram_max == 5
    assert s.spec_method == "off" and s.seed is None
    s = s.replace(spec_method="lookup", draft_tokens=3, seed=4, top_k=20)
    assert s.speculative_params().method is SpecMethod.PROMPT_LOOKUP
    assert s.speculative_params().draft_tokens == 3
    sampling = s.sampling_params()
    assert (sampling.temperature, sampling.top_k, sampling.seed) == (0.5, 20, 4)
    assert "Prompt lookup" in s.describe_speculation() and "k=3" in s.describe_speculation()


def test_draft_spans():
    assert split_delta("abc", [True, True]) == [(0, 3)]
    assert split_delta("abc", [False]) == []
    assert split_delta("abcd", [True, False]) == [(0, 2)]  # estimated without pieces
    assert split_delta("ab cd", [True, False], ["ab ", "cd"]) == [(0, 3)]
    assert merge([(5, 7), (0, 2), (2, 3), (6, 9)]) == [(0, 3), (5, 9)]


def test_export_to_markdown():
    conv = Conversation(title="Trip", system_prompt="You plan trips")
    messages = [
        Message(role=Role.USER, content="Plan a day in Rome"),
        Message(
            role=Role.ASSISTANT, content="Morning: the Forum", status=MessageStatus.INTERRUPTED
        ),
    ]
    text = to_markdown(conv, messages)
    assert text.startswith("# Trip\n")
    assert "## You\n\nPlan a day in Rome" in text
    assert "## Tandem *(interrupted)*\n\nMorning: the Forum" in text
    assert "System prompt:** You plan trips" in text


def test_percentile():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.5
    assert percentile(values, 99) > 99 and percentile([], 50) == 0.0


def test_store_survives_concurrent_reader(store):
    conv = store.create_conversation(Conversation())
    store.add_message(conv.id, Message(role=Role.USER, content="x"))
    other = sqlite3.connect(str(store.path))
    assert other.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1
    other.close()
