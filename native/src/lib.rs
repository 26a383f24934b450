//! The compiled read and write paths of spark-kafka-eos.
//!
//! `RangeConsumer` is a librdkafka consumer of one assigned partition that appends the records it
//! delivers straight into Arrow arrays (Spark's Kafka schema, arrow-rs builders), handed to Python through
//! Arrow's C data interface, so no Python object is made per record and no buffer is copied.
//! It decides nothing about ranges: the Python range reader (`read/partition_reader.py`)
//! keeps every rule of a read (range ends, EOF, lost offsets, stalls) and asks this consumer for
//! one step at a time, as it asks the pure-Python consumer.
//!
//! `TaskProducer` is a task's transactional librdkafka producer that produces straight from Arrow
//! columns and tallies its delivery reports, again with no Python object per record; the Python task
//! producer (`write/task_producer.py`) keeps every rule of the write.

mod arrow_buffers;
mod arrow_input;
mod c_strings;
mod consumer;
mod deliveries;
mod handle;
mod producer;
mod row_digest;

use pyo3::prelude::*;

/// librdkafka's name and description of an error code.
#[pyfunction]
fn error_name(code: i32) -> (String, String) {
    handle::error_name(code)
}

#[pymodule]
fn spark_kafka_eos_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<consumer::RangeConsumer>()?;
    m.add_class::<arrow_buffers::ExportedBatch>()?;
    m.add_class::<producer::TaskProducer>()?;
    m.add("LIBRDKAFKA_VERSION", consumer::librdkafka_version())?;
    m.add_function(wrap_pyfunction!(error_name, m)?)?;
    m.add_function(wrap_pyfunction!(row_digest::rows_digest, m)?)?;
    Ok(())
}
