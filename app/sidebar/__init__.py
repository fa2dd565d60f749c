"""The sidebar of saved conversations: its Qt model and view."""
