"""Spark's checkpoint as the sink reads it: where a query's checkpoint is, and the text of one of its files.

Files are read with pyarrow's file systems (local paths, ``file:``, ``s3://``/``s3a://``, ``gs://``, ``hdfs://``,
``abfs(s)://``; ``dbfs:/`` through Databricks' ``/dbfs`` mount). Apart from the rest of the replay check, so that a
task's worker can find its query's checkpoint without importing the driver's side.
"""

from __future__ import annotations

import json
import logging
import os
from urllib.parse import urlparse

log = logging.getLogger(__name__)

_SCHEMES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs"}
_DATABRICKS_MOUNT = "/dbfs"


def checkpoint_of_session(root: str | None, job_description: str | None, query_id: str) -> str | None:
    """Where Spark keeps the checkpoint of a query started without a ``checkpointLocation`` option: the session's
    ``spark.sql.streaming.checkpointLocation`` joined with the query's name, as Spark resolves it. ``root`` and
    ``job_description`` are a streaming task's local properties (Spark propagates the session's SQL confs to its
    tasks, and names each micro-batch's job ``<name>\nid = <query id>\n...``). None unless both are there and the
    query has a name. No I/O: the driver checks the place once (:func:`names_query`), not every task."""
    if not root or not job_description:
        return None
    name, _, rest = job_description.partition("\n")
    if not name or not rest.startswith(f"id = {query_id}"):
        return None
    return f"{root.rstrip('/')}/{name}"


def names_query(location: str, query_id: str) -> bool:
    """Whether the checkpoint at ``location`` is query ``query_id``'s: its ``metadata`` file names it."""
    try:
        found = json.loads(read_checkpoint_file(f"{location}/metadata")).get("id")
    except Exception as err:  # noqa: BLE001 - unreadable: the replay check then does without the offset log
        log.info("Cannot read Spark's checkpoint metadata under %s (%s)", location, err)
        return False
    return bool(found == query_id)


def read_checkpoint_file(location: str) -> str:
    """The text of the checkpoint file at ``location``."""
    parsed = urlparse(location)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file") or len(scheme) == 1:  # a path, file:/..., or a Windows drive letter
        path = parsed.path if scheme == "file" else location
        if not os.path.exists(path) and os.path.exists(_DATABRICKS_MOUNT + path):
            path = _DATABRICKS_MOUNT + path  # Databricks resolves a path without a scheme on DBFS
        with open(path, encoding="utf-8") as file:
            return file.read()
    if scheme == "dbfs":
        with open(_DATABRICKS_MOUNT + parsed.path, encoding="utf-8") as file:
            return file.read()
    from pyarrow import fs  # imported here: only a checkpoint on a remote store needs it

    uri = location.replace(f"{parsed.scheme}://", f"{_SCHEMES.get(scheme, scheme)}://", 1)
    filesystem, path = fs.FileSystem.from_uri(uri)
    with filesystem.open_input_stream(path) as stream:
        return bytes(stream.read()).decode("utf-8")
