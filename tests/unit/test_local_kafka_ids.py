"""The local broker's cluster id: never an id a command line reads as an option."""

import uuid

import pytest

from tests.harness import local_kafka


def test_a_random_id_that_starts_with_a_dash_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to "-" as the first url-safe base64 character; 1 in 64 random uuids do.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(local_kafka.uuid, "uuid4", lambda: next(draws))
    cluster_id = local_kafka._random_cluster_id()
    assert cluster_id == "AQEBAQEBAQEBAQEBAQEBAQ"


def test_ids_are_22_url_safe_characters() -> None:
    for _ in range(500):
        cluster_id = local_kafka._random_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
