"""What the server has done, for `tandem serve`'s log and the app's live panel."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServerStats:
    """Counters of API requests since the server started."""

    running: int = 0  # requests being answered now
    served: int = 0  # finished with a reply
    refused: int = 0  # 4xx: bad requests, unknown models, missing keys
    failed: int = 0  # the engine reported an error after the request was accepted
    cancelled: int = 0  # the client went away first
    generated_tokens: int = 0
