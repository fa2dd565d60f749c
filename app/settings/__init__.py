"""Per-chat generation settings: the data and the form that edits them."""
