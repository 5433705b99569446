"""kueue."""
