"""Integration tests of the reader."""
