"""What each figure of the live panel means (its tooltips), in one place."""

METRIC_TIPS = {
    "acceptance": "Accepted draft tokens / drafted tokens",
    "recent": "Draft acceptance over this reply's last verify rounds",
    "mal": "1 + accepted tokens per verify round (vLLM's definition)",
    "drafters": "Who drafted this reply's verify rounds: with Auto, a chat drafts with its "
    "model drafter or by prompt lookup, whichever has been accepted more often lately",
    "tpf": "Tokens produced per forward pass of the target model (1.00 without speculation)",
    "ahead": "Verify rounds queued before the last one was read back, so the host drafts while "
    "the GPU verifies. On a GPU the engine times this and rounds in series at each batch size and "
    "keeps the faster; on a CPU nothing overlaps and rounds run in series",
    "guessed": "Rounds ahead whose draft was drawn on a guess about the round before that proved "
    "wrong: their drafts are rejected (the reply stays exact), the cost of running ahead",
    "plain": "This reply's speed had it drafted nothing, from the engine's measured step costs",
    "cached": "Prompt tokens of the last reply served from the prompt cache",
    "saved": "Forward passes of the target model that speculation made unnecessary, "
    "since the engine started",
    "api": "Requests from the local server (Models ▸ Local server); they share the batch and "
    "the figures above with the chats",
    "disk": "The prompt cache's files on disk (kept between runs)",
}
