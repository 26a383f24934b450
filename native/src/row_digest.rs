//! An order-independent digest of the rows a task writes: the sum, modulo 2^128, of each row's 16-byte BLAKE2b
//! hash. Equal digests prove the same multiset of records (topic, partition, key, value, headers), whatever their
//! order; `write/row_digest.py` computes the same digest without this extension, byte for byte.
//!
//! A row is hashed as its fields one after another, each unambiguous: an absent field is `0x00`; a present byte
//! string is `0x01`, its length as 8 big-endian bytes, then its bytes; a partition is `0x01` and 4 big-endian
//! bytes; the headers are their count as 8 big-endian bytes, then each header's key and value as byte strings.

use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use pyo3::prelude::*;

use crate::arrow_input::{Binary, Exported, Headers, Int32};

fn bytes_field(hasher: &mut Blake2bVar, field: Option<&[u8]>) {
    match field {
        None => hasher.update(&[0]),
        Some(bytes) => {
            hasher.update(&[1]);
            hasher.update(&(bytes.len() as u64).to_be_bytes());
            hasher.update(bytes);
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
    let values = Binary::take(&values, "value", None)?;
    let rows = values.len();
    let topics = topics.as_ref().map(|column| Binary::take(column, "topic", Some(rows))).transpose()?;
    let keys = keys.as_ref().map(|column| Binary::take(column, "key", Some(rows))).transpose()?;
    let partitions = partitions.as_ref().map(|column| Int32::take(column, "partition", Some(rows))).transpose()?;
    let headers = headers.as_ref().map(|column| Headers::take(column, "headers", Some(rows))).transpose()?;
    let fixed = topic.map(|name| name.as_bytes().to_vec());
    let sum = py.allow_threads(|| {
        let mut sum: u128 = 0;
        for row in 0..rows {
            let mut hasher = Blake2bVar::new(16).expect("16 is a valid BLAKE2b output size");
            bytes_field(&mut hasher, fixed.as_deref().or_else(|| topics.as_ref().and_then(|t| t.get(row))));
            match partitions.as_ref().and_then(|p| p.get(row)) {
                None => hasher.update(&[0]),
                Some(partition) => {
                    hasher.update(&[1]);
                    hasher.update(&partition.to_be_bytes());
                }
            }
            bytes_field(&mut hasher, keys.as_ref().and_then(|k| k.get(row)));
            bytes_field(&mut hasher, values.get(row));
            let entries = headers.as_ref().map(|h| h.entries(row)).unwrap_or(0..0);
            hasher.update(&(entries.len() as u64).to_be_bytes());
            if let Some(h) = headers.as_ref() {
                for entry in entries {
                    bytes_field(&mut hasher, h.keys.get(entry));
                    bytes_field(&mut hasher, h.values.get(entry));
                }
            }
            let mut out = [0u8; 16];
            hasher.finalize_variable(&mut out).expect("the output buffer has the hash's size");
            sum = sum.wrapping_add(u128::from_be_bytes(out));
        }
        sum
    });
    Ok(format!("{sum:032x}"))
}
