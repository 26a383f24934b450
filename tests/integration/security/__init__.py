"""Integration tests of authentication, authorization and what logs may show."""
