"""The store as a tree that never loses history: migration from schema 1, versions, hiding and
restoring, forks, full-text search, pins, and damaged databases salvaged on open. No Qt loop."""

from __future__ import annotations

import os
import sqlite3

import pytest
from v1_database import SETTINGS, SUMMARY, make_v1_database

from app.chat.titles import title_from
from app.store import salvage
from app.store.conversation_store import Store
from app.store.migrations import SchemaTooNew
from app.store.records import Conversation, Message, Role
from app.store.reply_stats import decode, encode
from app.store.schema import SCHEMA_VERSION
from engine.requests import FinishReason, RequestStats, SpecStats


def _chat(store: Store, title: str, *texts: str) -> tuple[Conversation, list[Message]]:
    conversation = store.create_conversation(Conversation(title=title))
    messages = []
    for i, text in enumerate(texts):
        role = Role.USER if i % 2 == 0 else Role.ASSISTANT
        messages.append(store.add_message(conversation.id, Message(role=role, content=text)))
    return conversation, messages


# -- migration ---------------------------------------------------------------------------------


def test_migration_from_v1_keeps_every_chat_and_message(tmp_path):
    path = tmp_path / "tandem.sqlite3"
    expected = make_v1_database(path)
    store = Store(path)
    assert store.migrated_from == 1
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert (tmp_path / f"tandem.sqlite3.before-v{SCHEMA_VERSION}").is_file()  # the old file kept
    conversations = {c.title: c for c in (store.conversation(i) for i in (1, 2, 3))}
    assert set(conversations) == set(expected)
    for title, messages in expected.items():
        got = store.messages(conversations[title].id)
        assert [(m.role.value, m.content, m.status.value) for m in got] == messages
        # a chain: each message answers the one before it, the last one is on screen
        assert [m.parent_id for m in got] == ([None] + [m.id for m in got[:-1]])[: len(got)]
        assert all(m.version == (1, 1) for m in got)
    lisbon = conversations["Trip to Lisbon"]
    assert lisbon.system_prompt == "You plan trips" and lisbon.settings.max_tokens == 64
    assert lisbon.is_open and not conversations["Otters"].is_open
    reply = store.messages(lisbon.id)[1]
    assert reply.draft_spans == [(0, 7)] and reply.stats == SUMMARY
    assert reply.cut_at_max_tokens
    stats = store.last_reply_stats(lisbon.id)  # the summary reads back as RequestStats
    assert stats.generated_tokens == 48 and stats.spec.accepted_tokens == 22
    assert stats.finish_reason is FinishReason.LENGTH
    for key, value in SETTINGS.items():
        assert store.setting(key) == value
    # the search index was built for the old messages
    hits = store.list_conversations("monastery")
    assert [h.title for h in hits] == ["Trip to Lisbon"] and "monastery" in hits[0].snippet
    # and the migrated chats go on as trees
    store.add_message(
        lisbon.id,
        Message(role=Role.ASSISTANT, content="Belém, again"),
        parent_id=store.messages(lisbon.id)[2].id,
    )
    assert store.messages(lisbon.id)[-1].version == (2, 2)
    store.close()
    again = Store(path)  # opening again migrates nothing
    assert again.migrated_from == SCHEMA_VERSION
    assert len(again.messages(lisbon.id)) == 4
    again.close()


def test_a_newer_schema_is_refused_clearly(tmp_path):
    path = tmp_path / "tandem.sqlite3"
    Store(path).close()
    db = sqlite3.connect(str(path))
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(SchemaTooNew, match="newer Tandem"):
        Store(path)


# -- the tree ----------------------------------------------------------------------------------


def test_versions_are_siblings_and_switching_keeps_the_choice_below(store):
    conversation, (question, first) = _chat(store, "Trip", "Plan a trip", "Answer one")
    second = store.add_message(
        conversation.id, Message(role=Role.ASSISTANT, content="Answer two"), parent_id=question.id
    )
    follow = store.add_message(conversation.id, Message(role=Role.USER, content="More please"))
    assert [m.content for m in store.messages(conversation.id)] == [
        "Plan a trip",
        "Answer two",
        "More please",
    ]
    assert store.messages(conversation.id)[1].version == (2, 2)
    store.show_version(conversation.id, first.id)
    assert [m.content for m in store.messages(conversation.id)] == ["Plan a trip", "Answer one"]
    assert store.messages(conversation.id)[1].version == (1, 2)
    # back to version 2: the branch below it (the follow-up) comes back too
    assert store.show_version(conversation.id, second.id) == follow.id
    assert store.messages(conversation.id)[-1].content == "More please"


def test_hidden_messages_leave_the_branch_and_the_search_and_come_back(store):
    conversation, (question, reply) = _chat(store, "Otters", "Tell me about otters", "Otters nap")
    store.set_hidden(reply.id, True)
    assert [m.content for m in store.messages(conversation.id)] == ["Tell me about otters"]
    assert store.list_conversations("nap") == []
    assert store.message_count(conversation.id) == 1
    store.set_hidden(reply.id, False)
    assert [m.content for m in store.messages(conversation.id)] == [
        "Tell me about otters",
        "Otters nap",
    ]
    assert [h.id for h in store.list_conversations("nap")] == [conversation.id]


def test_hidden_text_is_cleared_at_the_next_start_and_empty_closed_chats_go(data_dir):
    path = data_dir / "db.sqlite3"
    store = Store(path)
    conversation, (_q, reply) = _chat(store, "Secret", "hello", "the secret word is swordfish")
    store.set_hidden(reply.id, True)
    empty = store.create_conversation(Conversation(title="Never used", is_open=False))
    store.close()
    store = Store(path)
    assert store.message(reply.id).content == ""
    assert store.conversation(empty.id) is None
    assert store.conversation(conversation.id) is not None
    store.close()


def test_fork_copies_the_branch_down_to_a_message(store):
    conversation, messages = _chat(store, "Trip", "one", "two", "three", "four")
    fork = store.fork(conversation.id, messages[1].id)
    copied = store.messages(fork.id)
    assert [m.content for m in copied] == ["one", "two"]
    assert {m.id for m in copied}.isdisjoint({m.id for m in messages})
    assert fork.title == "Trip (fork)" and fork.is_open
    assert len(store.messages(conversation.id)) == 4  # the original is untouched


def test_pinned_first_and_chats_without_messages_not_listed(store):
    old, _ = _chat(store, "Old", "hi")
    new, _ = _chat(store, "New", "hello")
    store.create_conversation(Conversation(title="New chat"))  # a tab nobody typed in
    assert [s.title for s in store.list_conversations()] == ["New", "Old"]
    store.set_pinned(old.id, True)
    listed = store.list_conversations()
    assert [s.title for s in listed] == ["Old", "New"] and listed[0].pinned


# -- search ------------------------------------------------------------------------------------


def test_full_text_search_finds_words_in_every_branch_with_snippets(store):
    conversation, (question, _reply) = _chat(
        store,
        "Cooking",
        "How long do I boil pasta?",
        "Boil the pasta for nine minutes, then taste it: it should be al dente.",
    )
    store.add_message(  # an older version of the reply, not on screen
        conversation.id,
        Message(role=Role.ASSISTANT, content="Eleven minutes for spaghetti, tasting at nine."),
        parent_id=question.id,
    )
    _chat(store, "Café", "Où est le café?", "Le café est près de la gare.")
    hits = store.list_conversations("spaghetti")
    assert [h.id for h in hits] == [conversation.id]
    snippet, marks = hits[0].snippet, hits[0].snippet_marks
    assert "spaghetti" in snippet and [snippet[s:e] for s, e in marks] == ["spaghetti"]
    hit = store.message(hits[0].hit_message_id)
    assert "spaghetti" in hit.content
    # prefix words, all required; accents folded
    assert [h.title for h in store.list_conversations("al den")] == ["Cooking"]
    assert store.list_conversations("pasta sushi") == []
    marked = store.list_conversations("cafe gare")[0]
    assert {marked.snippet[s:e].lower() for s, e in marked.snippet_marks} >= {"café", "gare"}
    assert store.list_conversations('"; DROP TABLE messages') == []


# -- stats -------------------------------------------------------------------------------------


def test_reply_stats_keep_everything_the_panel_shows(store):
    stats = RequestStats(
        prompt_tokens=40,
        cached_tokens=32,
        cache_source="disk",
        generated_tokens=12,
        ttft_s=0.05,
        decode_tokens_per_s=20.5,
        elapsed_s=0.7,
        finish_reason=FinishReason.STOP,
        spec=SpecStats(
            rounds=4,
            draft_tokens=16,
            accepted_tokens=9,
            accepted_by_position=[4, 3, 2],
            drafted_by_position=[4, 4, 4],
            target_forwards=5,
            emitted_tokens=12,
            rounds_by_drafter={"lookup": 3, "head": 1},
            guessed_rounds=1,
            ahead_rounds=3,
        ),
        context_tokens=52,
        plain_tokens_per_s=15.0,
        recent_acceptance=0.6,
        speculation_note=None,
    )
    assert decode(encode(stats)) == stats
    conversation, _ = _chat(store, "Stats", "hi")
    store.add_message(
        conversation.id, Message(role=Role.ASSISTANT, content="hey", stats=encode(stats))
    )
    assert store.last_reply_stats(conversation.id) == stats


# -- titles ------------------------------------------------------------------------------------


def test_titles_are_short_and_tell_chats_apart():
    assert title_from("Can you plan a 3-day trip to Lisbon for me in May?") == (
        "Plan a 3-day trip to Lisbon…"
    )
    assert title_from("## What is the capital of France?") == "What is the capital of France?"
    assert title_from("hey, please write a long poem about the sea and the moon") == (
        "Write a long poem…"
    )
    assert len(title_from("word " * 40)) <= 32


# -- damaged databases -------------------------------------------------------------------------


def _filled(path, chats: int = 40, replies: int = 5) -> None:
    store = Store(path)
    for n in range(chats):
        texts = []
        for k in range(replies):
            texts += [f"question {n}.{k} " + "filler " * 30, f"answer {n}.{k} " + "words " * 40]
        _chat(store, f"Chat {n}", *texts)
    store.set_setting("theme_mode", "dark")
    store.close()


def _moved_aside(data_dir) -> list:
    return sorted(p for p in data_dir.iterdir() if ".damaged-" in p.name)


def test_a_garbage_file_is_moved_aside_and_the_app_starts_empty(data_dir):
    data_dir.mkdir(parents=True)
    path = data_dir / "tandem.sqlite3"
    path.write_bytes(b"this is not a database, just some bytes " * 200)
    store = Store(path)
    report = store.damaged
    assert report is not None and "not a database" in report.problem
    assert report.damaged_path.read_bytes().startswith(b"this is not a database")
    assert str(report.damaged_path) in report.message
    assert store.list_conversations() == []
    _chat(store, "Fresh", "it works again")  # and the fresh database takes writes
    assert [s.title for s in store.list_conversations()] == ["Fresh"]
    store.close()


def test_a_truncated_database_is_salvaged(data_dir):
    path = data_dir / "tandem.sqlite3"
    _filled(path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size * 2 // 3)
    store = Store(path)
    report = store.damaged
    assert report is not None and report.damaged_path.stat().st_size == size * 2 // 3
    assert 0 < report.messages < 400 and report.conversations > 0
    chats = store.list_conversations()
    assert chats, "nothing was salvaged"
    for summary in chats:
        messages = store.messages(summary.id)
        assert messages and all(m.content.split()[0] in ("question", "answer") for m in messages)
    assert store.list_conversations("answer")  # the search index was rebuilt
    store.close()


def test_a_corrupted_page_is_salvaged_around(data_dir):
    path = data_dir / "tandem.sqlite3"
    _filled(path)
    page_size = 4096
    pages = path.stat().st_size // page_size
    with open(path, "r+b") as f:  # garbage over one page in the middle of the messages
        f.seek(page_size * (pages // 2))
        f.write(os.urandom(page_size))
    assert salvage.problem(path) is not None
    store = Store(path)
    report = store.damaged
    assert report is not None
    assert report.messages >= 300, report  # most of the 400 messages survive
    assert store.setting("theme_mode") == "dark"
    total = sum(store.message_count(s.id) for s in store.list_conversations())
    assert total == report.messages
    for summary in store.list_conversations():  # each chat still reads as one branch
        assert len(store.messages(summary.id)) == store.message_count(summary.id)
    assert _moved_aside(data_dir) == [report.damaged_path]
    store.close()
    # the next start finds a sound database and moves nothing
    again = Store(path)
    assert again.damaged is None and len(_moved_aside(data_dir)) == 1
    again.close()
