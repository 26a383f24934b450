//! An order-independent digest of the rows a task writes: the sum, modulo 2^128, of each row's XXH3-128 hash. Equal
//! digests prove the same multiset of records (topic, partition, key, value, headers), whatever their order;
//! `write/row_digest.py` computes the same digest without this extension (with the xxhash package).
//!
//! A row is hashed as its fields one after another, each unambiguous: an absent field is `0x00`; a present byte
//! string is `0x01`, its length as 8 big-endian bytes, then its bytes; a partition is `0x01` and 4 big-endian
//! bytes; the headers are their count as 8 big-endian bytes, then each header's key and value as byte strings.

use pyo3::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

use crate::arrow_input::{Columns, Exported};

fn bytes_field(row: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => row.push(0),
        Some(bytes) => {
            row.push(1);
            row.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            row.extend_from_slice(bytes);
        }
    }
}

/// The digest of the rows of these columns, as 32 lowercase hex digits; `topic` is every row's topic when given.
#[pyfunction]
#[pyo3(signature = (topic, topics, values, keys, partitions, headers))]
pub fn rows_digest(
    py: Python<'_>,
    topic: Option<&str>,
    topics: Option<Exported<'_>>,
    values: Exported<'_>,
    keys: Option<Exported<'_>>,
    partitions: Option<Exported<'_>>,
    headers: Option<Exported<'_>>,
) -> PyResult<String> {
    let Columns { values, topics, keys, partitions, headers } =
        Columns::take(topics, values, keys, partitions, headers)?;
    let rows = values.len();
    let fixed = topic.map(|name| name.as_bytes().to_vec());
    let sum = py.allow_threads(|| {
        let mut sum: u128 = 0;
        let mut row_bytes = Vec::with_capacity(256);
        for row in 0..rows {
            row_bytes.clear();
            bytes_field(&mut row_bytes, fixed.as_deref().or_else(|| topics.as_ref().and_then(|t| t.get(row))));
            match partitions.as_ref().and_then(|p| p.get(row)) {
                None => row_bytes.push(0),
                Some(partition) => {
                    row_bytes.push(1);
                    row_bytes.extend_from_slice(&partition.to_be_bytes());
                }
            }
            bytes_field(&mut row_bytes, keys.as_ref().and_then(|k| k.get(row)));
            bytes_field(&mut row_bytes, values.get(row));
            let entries = headers.as_ref().map(|h| h.entries(row)).unwrap_or(0..0);
            row_bytes.extend_from_slice(&(entries.len() as u64).to_be_bytes());
            if let Some(h) = headers.as_ref() {
                for entry in entries {
                    bytes_field(&mut row_bytes, h.keys.get(entry));
                    bytes_field(&mut row_bytes, h.values.get(entry));
                }
            }
            sum = sum.wrapping_add(xxh3_128(&row_bytes));
        }
        sum
    });
    Ok(format!("{sum:032x}"))
}
