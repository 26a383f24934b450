//! The compiled read path of spark-kafka-eos.
//!
//! `RangeConsumer` is a librdkafka consumer of one assigned partition that appends the records it
//! delivers straight into Arrow buffers (Spark's Kafka schema), so no Python object is made per
//! record. It decides nothing about ranges: the Python range reader (`read/partition_reader.py`)
//! keeps every rule of a read (range ends, EOF, lost offsets, stalls) and asks this consumer for
//! one step at a time, as it asks the pure-Python consumer.

mod arrow_buffers;
mod consumer;

use pyo3::prelude::*;

#[pymodule]
fn spark_kafka_eos_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<consumer::RangeConsumer>()?;
    m.add("LIBRDKAFKA_VERSION", consumer::librdkafka_version())?;
    Ok(())
}
