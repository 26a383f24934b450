"""Errors for missing ACLs that name the ACL to grant.

A topic the principal may not describe is left out of the cluster's metadata, so without a
direct question it just looks absent, and a stream would read nothing, forever, without a word.
"""

from __future__ import annotations

from spark_kafka_eos._internal.config.reader import ReaderOptions
from spark_kafka_eos.errors import KafkaEosAuthorizationError


def principal_of(options: ReaderOptions) -> str:
    """The principal as an ACL names it, when the options say (SASL username); else a placeholder."""
    username = options.kafka_config.get("sasl.username")
    return f"User:{username}" if username else "<the principal of these kafka.* credentials>"


def topic_authorization_error(options: ReaderOptions, topics: list[str], detail: str) -> KafkaEosAuthorizationError:
    """The error for topics the principal may not describe or read."""
    operations = "--operation Describe --operation Read"
    return KafkaEosAuthorizationError(
        f"Kafka at {options.bootstrap_servers} refused {principal_of(options)} access to topic(s) "
        f"{', '.join(topics)} ({detail}). A read needs the Describe and Read ACLs on each topic. Fix: "
        + "; ".join(
            f"kafka-acls --bootstrap-server {options.bootstrap_servers} --add --allow-principal "
            f"{principal_of(options)} {operations} --topic {topic}"
            for topic in topics
        )
        + "."
    )
