//! Arrow buffers of Spark's Kafka schema, filled one record at a time and handed to Python as bytes
//! (validity bitmaps, 32-bit offsets, values), which `pyarrow.Array.from_buffers` wraps.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

#[derive(Default)]
struct Validity {
    bits: Vec<u8>,
    len: usize,
    nulls: usize,
}

impl Validity {
    fn push(&mut self, valid: bool) {
        if self.len % 8 == 0 {
            self.bits.push(0);
        }
        if valid {
            self.bits[self.len / 8] |= 1 << (self.len % 8);
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }

    /// None when every slot is valid: Arrow needs no bitmap then.
    fn to_python<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        (self.nulls > 0).then(|| PyBytes::new(py, &self.bits))
    }
}

/// A binary (or UTF-8 string) column.
struct BinaryColumn {
    validity: Validity,
    offsets: Vec<i32>,
    data: Vec<u8>,
}

impl BinaryColumn {
    fn new() -> Self {
        BinaryColumn { validity: Validity::default(), offsets: vec![0], data: Vec::new() }
    }

    /// Empty, with room for as much as `like` holds.
    fn sized_like(like: &BinaryColumn) -> Self {
        BinaryColumn {
            validity: Validity { bits: Vec::with_capacity(like.validity.bits.len()), len: 0, nulls: 0 },
            offsets: {
                let mut offsets = Vec::with_capacity(like.offsets.len());
                offsets.push(0);
                offsets
            },
            data: Vec::with_capacity(like.data.len()),
        }
    }

    fn push(&mut self, value: Option<&[u8]>) {
        self.validity.push(value.is_some());
        if let Some(bytes) = value {
            self.data.extend_from_slice(bytes);
        }
        self.offsets.push(arrow_offset(self.data.len()));
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            [
                self.validity.to_python(py).into_pyobject(py)?.into_any(),
                PyBytes::new(py, as_bytes(&self.offsets)).into_any(),
                PyBytes::new(py, &self.data).into_any(),
            ],
        )
    }
}

/// `array<struct<key: string, value: binary>>`, null (not empty) for a record without headers.
struct HeaderColumn {
    validity: Validity,
    offsets: Vec<i32>,
    names: BinaryColumn,
    values: BinaryColumn,
}

impl HeaderColumn {
    fn new() -> Self {
        HeaderColumn { validity: Validity::default(), offsets: vec![0], names: BinaryColumn::new(), values: BinaryColumn::new() }
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            [
                self.validity.to_python(py).into_pyobject(py)?.into_any(),
                PyBytes::new(py, as_bytes(&self.offsets)).into_any(),
                self.names.to_python(py)?.into_any(),
                self.values.to_python(py)?.into_any(),
            ],
        )
    }
}

/// The columns of one record batch of one partition (topic and partition are constant, so Python
/// makes those two columns).
pub struct BatchBuilder {
    keys: BinaryColumn,
    values: BinaryColumn,
    offsets: Vec<i64>,
    timestamps: Vec<i64>,
    timestamp_validity: Validity,
    timestamp_types: Vec<i32>,
    headers: Option<HeaderColumn>,
    /// Key, value and header bytes, as the pure-Python builder counts them for `maxBytesPerBatch`.
    pub bytes: usize,
}

impl BatchBuilder {
    pub fn new(include_headers: bool) -> Self {
        BatchBuilder {
            keys: BinaryColumn::new(),
            values: BinaryColumn::new(),
            offsets: Vec::new(),
            timestamps: Vec::new(),
            timestamp_validity: Validity::default(),
            timestamp_types: Vec::new(),
            headers: include_headers.then(HeaderColumn::new),
            bytes: 0,
        }
    }

    /// Empty, with room for as many records and bytes as `like` holds: batches of a range are alike.
    pub fn sized_like(like: &BatchBuilder) -> Self {
        let records = like.len();
        BatchBuilder {
            keys: BinaryColumn::sized_like(&like.keys),
            values: BinaryColumn::sized_like(&like.values),
            offsets: Vec::with_capacity(records),
            timestamps: Vec::with_capacity(records),
            timestamp_validity: Validity { bits: Vec::with_capacity(like.timestamp_validity.bits.len()), len: 0, nulls: 0 },
            timestamp_types: Vec::with_capacity(records),
            headers: like.headers.as_ref().map(|_| HeaderColumn::new()),
            bytes: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn push_record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, offset: i64, timestamp_us: Option<i64>, timestamp_type: i32) {
        self.keys.push(key);
        self.values.push(value);
        self.offsets.push(offset);
        self.timestamp_validity.push(timestamp_us.is_some());
        self.timestamps.push(timestamp_us.unwrap_or(0));
        self.timestamp_types.push(timestamp_type);
        self.bytes += key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    }

    /// The headers of the record just pushed; `None` for a record without any.
    pub fn push_headers(&mut self, headers: Option<&[(&[u8], Option<&[u8]>)]>) {
        let Some(column) = self.headers.as_mut() else { return };
        column.validity.push(headers.is_some());
        for (name, value) in headers.unwrap_or(&[]) {
            column.names.push(Some(name));
            column.values.push(*value);
            self.bytes += name.len() + value.map_or(0, <[u8]>::len);
        }
        column.offsets.push(arrow_offset(column.names.offsets.len() - 1));
    }

    /// `(rows, keys, values, offsets, (timestamp validity, timestamps), timestamp types, headers or None)`.
    pub fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let timestamps = PyTuple::new(
            py,
            [
                self.timestamp_validity.to_python(py).into_pyobject(py)?.into_any(),
                PyBytes::new(py, as_bytes(&self.timestamps)).into_any(),
            ],
        )?;
        let headers = match &self.headers {
            Some(column) => column.to_python(py)?.into_any(),
            None => py.None().into_bound(py),
        };
        PyTuple::new(
            py,
            [
                self.len().into_pyobject(py)?.into_any(),
                self.keys.to_python(py)?.into_any(),
                self.values.to_python(py)?.into_any(),
                PyBytes::new(py, as_bytes(&self.offsets)).into_any(),
                timestamps.into_any(),
                PyBytes::new(py, as_bytes(&self.timestamp_types)).into_any(),
                headers,
            ],
        )
    }
}

/// A 32-bit Arrow offset; the consumer seals a batch before any column passes 2 GiB.
fn arrow_offset(position: usize) -> i32 {
    i32::try_from(position).expect("an Arrow column of a batch passed 2 GiB")
}

/// The bytes of a slice of plain integers, in native (little-endian on every supported platform) order, as Arrow lays them out.
fn as_bytes<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: i32 and i64 have no padding and every byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}
