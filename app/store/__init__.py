"""The conversation store: SQLite records, the store itself and Markdown export."""
