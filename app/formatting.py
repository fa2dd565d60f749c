"""Small text formatters shared by the views (sizes, rates, reply summaries)."""

from __future__ import annotations

import time

from engine.requests import RequestStats


def fmt_bytes(n: int | float | None) -> str:
    if not n:
        return "0 B"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit in ("B", "KB") else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def fmt_count(n: int | float) -> str:
    n = float(n)
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e4:
        return f"{n / 1e3:.0f}k"
    return f"{n:.0f}"


def fmt_rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s:.1f} tok/s" if tokens_per_s else "–"


def fmt_percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{100 * fraction:.0f}%"


def fmt_duration(seconds: float) -> str:
    """A span as people say it: "40 s", "12 min", "2 h 5 min"."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def fmt_when(timestamp: float, *, now: float | None = None) -> str:
    now = now or time.time()
    delta = now - timestamp
    if delta < 60:
        return "just now"
    if delta < 3600:
        return f"{int(delta // 60)} min ago"
    if delta < 86400:
        return time.strftime("%H:%M", time.localtime(timestamp))
    return time.strftime("%b %d", time.localtime(timestamp))


def stats_summary(stats: RequestStats) -> dict:
    """What a finished (or running) reply keeps of its RequestStats, as plain JSON."""
    spec = stats.spec
    return {
        "prompt_tokens": stats.prompt_tokens,
        "cached_tokens": stats.cached_tokens,
        "cache_source": stats.cache_source,
        "generated_tokens": stats.generated_tokens,
        "ttft_s": stats.ttft_s,
        "decode_tokens_per_s": stats.decode_tokens_per_s,
        "elapsed_s": stats.elapsed_s,
        "finish_reason": stats.finish_reason.value if stats.finish_reason else None,
        "draft_tokens": spec.draft_tokens,
        "accepted_tokens": spec.accepted_tokens,
        "rounds": spec.rounds,
        "target_forwards": spec.target_forwards,
        "emitted_tokens": spec.emitted_tokens,
    }


def reply_meta(summary: dict | None) -> str:
    """One line under a reply: "64 tokens · 14.2 tok/s · 38% accepted"."""
    if not summary:
        return ""
    parts = []
    tokens = summary.get("generated_tokens") or 0
    if tokens:
        parts.append(f"{tokens} token{'s' if tokens != 1 else ''}")
    rate = summary.get("decode_tokens_per_s") or 0.0
    if rate:
        parts.append(fmt_rate(rate))
    drafted = summary.get("draft_tokens") or 0
    if drafted:
        parts.append(f"{fmt_percent((summary.get('accepted_tokens') or 0) / drafted)} accepted")
    cached = summary.get("cached_tokens") or 0
    if cached:
        parts.append(f"{cached} cached")
    return " · ".join(parts)
