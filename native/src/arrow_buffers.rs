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
        HeaderColumn {
            validity: Validity::default(),
            offsets: vec![0],
            names: BinaryColumn::new(),
            values: BinaryColumn::new(),
        }
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

/// A record header: its name and its value (None: a null value).
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

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
            timestamp_validity: Validity {
                bits: Vec::with_capacity(like.timestamp_validity.bits.len()),
                len: 0,
                nulls: 0,
            },
            timestamp_types: Vec::with_capacity(records),
            headers: like.headers.as_ref().map(|_| HeaderColumn::new()),
            bytes: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn push_record(
        &mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        offset: i64,
        timestamp_us: Option<i64>,
        timestamp_type: i32,
    ) {
        self.keys.push(key);
        self.values.push(value);
        self.offsets.push(offset);
        self.timestamp_validity.push(timestamp_us.is_some());
        self.timestamps.push(timestamp_us.unwrap_or(0));
        self.timestamp_types.push(timestamp_type);
        self.bytes += key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    }

    /// The headers of the record just pushed; `None` for a record without any.
    pub fn push_headers(&mut self, headers: Option<&[Header<'_>]>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_holds_each_record_its_nulls_and_headers() {
        let mut batch = BatchBuilder::new(true);
        batch.push_record(Some(b"k"), None, 5, Some(1_000), 0);
        batch.push_headers(Some(&[(b"h", Some(b"v")), (b"nil", None)]));
        batch.push_record(None, Some(b"val"), 6, None, 2);
        batch.push_headers(None);
        assert_eq!(batch.len(), 2);
        assert_eq!((batch.keys.offsets.as_slice(), batch.keys.validity.bits.as_slice()), (&[0, 1, 1][..], &[0b01][..]));
        assert_eq!(
            (batch.values.offsets.as_slice(), batch.values.validity.bits.as_slice()),
            (&[0, 0, 3][..], &[0b10][..])
        );
        assert_eq!((batch.offsets.as_slice(), batch.timestamps.as_slice()), (&[5, 6][..], &[1_000, 0][..]));
        assert_eq!((batch.timestamp_validity.nulls, batch.timestamp_types.as_slice()), (1, &[0, 2][..]));
        let headers = batch.headers.as_ref().unwrap();
        assert_eq!((headers.offsets.as_slice(), headers.validity.bits.as_slice()), (&[0, 2, 2][..], &[0b01][..]));
        assert_eq!((headers.names.data.as_slice(), headers.values.offsets.as_slice()), (&b"hnil"[..], &[0, 1, 1][..]));
        // Keys, values and header names and values, as maxBytesPerBatch counts them.
        assert_eq!(batch.bytes, 1 + 3 + 1 + 1 + 3);
    }

    #[test]
    fn a_column_without_nulls_has_no_bitmap_and_one_with_them_spans_its_bytes() {
        let mut column = BinaryColumn::new();
        for _ in 0..9 {
            column.push(Some(b"x"));
        }
        assert_eq!((column.validity.nulls, column.validity.bits.as_slice()), (0, &[0xff, 0x01][..]));
        column.push(None);
        assert_eq!(
            (column.validity.nulls, column.validity.bits.as_slice(), column.validity.len),
            (1, &[0xff, 0x01][..], 10)
        );
        assert_eq!(column.offsets.last(), Some(&9));
    }

    #[test]
    fn a_batch_sized_like_another_starts_empty() {
        let mut full = BatchBuilder::new(false);
        full.push_record(Some(b"k"), Some(b"v"), 1, Some(1), 0);
        let next = BatchBuilder::sized_like(&full);
        assert_eq!(
            (next.len(), next.bytes, next.keys.offsets.as_slice(), next.headers.is_none()),
            (0, 0, &[0][..], true)
        );
    }

    #[test]
    fn integers_are_laid_out_little_endian() {
        assert_eq!(as_bytes(&[1i32, 256]), [1, 0, 0, 0, 0, 1, 0, 0]);
    }
}
