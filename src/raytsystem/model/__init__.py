"""The model layer: pure functions from bytes to normalized text, segments, claims and index rows."""
