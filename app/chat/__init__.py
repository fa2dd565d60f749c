"""One chat: its Qt message model, the message view and bubbles, the composer and the controller that joins them."""
