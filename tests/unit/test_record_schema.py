"""The Arrow schema the reader emits is the one Spark derives from the read schema."""

from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from spark_kafka_eos._internal.schema import arrow_record_schema, record_schema


@pytest.mark.parametrize("include_headers", [False, True])
def test_the_arrow_schema_is_sparks_own_conversion_of_the_read_schema(include_headers: bool) -> None:
    assert arrow_record_schema(include_headers) == to_arrow_schema(record_schema(include_headers), timezone="UTC")
