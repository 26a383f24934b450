//! Record batches of Spark's Kafka schema, built one record at a time with arrow-rs builders and handed to
//! Python through Arrow's C data interface (`__arrow_c_array__`), without a copy: pyarrow takes the buffers over.
//! Topic and partition are constant in a batch, so Python makes those two columns.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int32Builder, Int64Builder, ListBuilder, StructBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::ffi::to_ffi;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::{DataType, Field, Fields};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// A record header: its name and its value (None: a null value).
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

/// Header names are built as binary: Python views them as Spark's strings and validates them once per batch.
fn header_fields() -> Fields {
    Fields::from(vec![Field::new("key", DataType::Binary, true), Field::new("value", DataType::Binary, true)])
}

fn header_builder(capacity: usize) -> ListBuilder<StructBuilder> {
    let entries = StructBuilder::from_fields(header_fields(), capacity);
    ListBuilder::new(entries).with_field(Field::new("item", DataType::Struct(header_fields()), true))
}

/// The columns of one record batch of one partition.
pub struct BatchBuilder {
    keys: BinaryBuilder,
    values: BinaryBuilder,
    offsets: Int64Builder,
    timestamps: TimestampMicrosecondBuilder,
    timestamp_types: Int32Builder,
    headers: Option<ListBuilder<StructBuilder>>,
    /// Key, value and header bytes, as the pure-Python builder counts them for `maxBytesPerBatch`.
    pub bytes: usize,
    rows: usize,
}

impl BatchBuilder {
    pub fn new(include_headers: bool) -> Self {
        BatchBuilder::with_capacity(include_headers, 0, 0)
    }

    /// Empty, with room for as many records and bytes as `like` holds: batches of a range are alike.
    pub fn sized_like(like: &BatchBuilder) -> Self {
        BatchBuilder::with_capacity(like.headers.is_some(), like.rows, like.bytes)
    }

    fn with_capacity(include_headers: bool, rows: usize, bytes: usize) -> Self {
        BatchBuilder {
            keys: BinaryBuilder::with_capacity(rows, 0),
            values: BinaryBuilder::with_capacity(rows, bytes),
            offsets: Int64Builder::with_capacity(rows),
            timestamps: TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            timestamp_types: Int32Builder::with_capacity(rows),
            headers: include_headers.then(|| header_builder(0)),
            bytes: 0,
            rows: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn push_record(
        &mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        offset: i64,
        timestamp_us: Option<i64>,
        timestamp_type: i32,
    ) {
        self.keys.append_option(key);
        self.values.append_option(value);
        self.offsets.append_value(offset);
        self.timestamps.append_option(timestamp_us);
        self.timestamp_types.append_value(timestamp_type);
        self.bytes += key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
        self.rows += 1;
    }

    /// The headers of the record just pushed; `None` for a record without any (a null, not an empty list).
    pub fn push_headers(&mut self, headers: Option<&[Header<'_>]>) {
        let Some(column) = self.headers.as_mut() else { return };
        let Some(headers) = headers else {
            column.append_null();
            return;
        };
        let entries = column.values();
        for (name, value) in headers {
            entries.field_builder::<BinaryBuilder>(0).expect("key builder").append_value(name);
            entries.field_builder::<BinaryBuilder>(1).expect("value builder").append_option(*value);
            entries.append(true);
            self.bytes += name.len() + value.map_or(0, <[u8]>::len);
        }
        column.append(true);
    }

    /// The batch: a struct array of key, value, offset, timestamp, timestampType and, when asked for, headers.
    pub fn finish(mut self) -> StructArray {
        let mut fields = vec![
            Field::new("key", DataType::Binary, true),
            Field::new("value", DataType::Binary, true),
            Field::new("offset", DataType::Int64, false),
        ];
        let mut columns: Vec<ArrayRef> =
            vec![Arc::new(self.keys.finish()), Arc::new(self.values.finish()), Arc::new(self.offsets.finish())];
        let timestamps = self.timestamps.finish();
        fields.push(Field::new("timestamp", timestamps.data_type().clone(), true));
        columns.push(Arc::new(timestamps));
        fields.push(Field::new("timestampType", DataType::Int32, false));
        columns.push(Arc::new(self.timestamp_types.finish()));
        if let Some(mut headers) = self.headers.take() {
            let headers = headers.finish();
            fields.push(Field::new("headers", headers.data_type().clone(), true));
            columns.push(Arc::new(headers));
        }
        StructArray::new(Fields::from(fields), columns, None)
    }
}

/// A finished batch, which Python imports through Arrow's PyCapsule interface (`pyarrow.record_batch(batch)`).
#[pyclass(frozen)]
pub struct ExportedBatch {
    batch: StructArray,
}

impl ExportedBatch {
    pub fn new(batch: StructArray) -> Self {
        ExportedBatch { batch }
    }
}

#[pymethods]
impl ExportedBatch {
    /// (schema capsule, array capsule) of the C data interface. The importer takes the buffers over; a capsule
    /// never imported releases its struct when it is freed.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema; // the protocol lets an exporter keep its own types
        let (array, schema) =
            to_ffi(&self.batch.to_data()).map_err(|err| PyRuntimeError::new_err(format!("Arrow export: {err}")))?;
        let schema = PyCapsule::new(py, schema, Some(c"arrow_schema".to_owned()))?;
        let array = PyCapsule::new(py, array, Some(c"arrow_array".to_owned()))?;
        Ok((schema, array))
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};

    use super::*;

    #[test]
    fn a_batch_holds_each_record_its_nulls_and_headers() {
        let mut batch = BatchBuilder::new(true);
        batch.push_record(Some(b"k"), None, 5, Some(1_000), 0);
        batch.push_headers(Some(&[(b"h", Some(b"v")), (b"nil", None)]));
        batch.push_record(None, Some(b"val"), 6, None, 2);
        batch.push_headers(None);
        batch.push_record(Some(b""), Some(b""), 7, Some(-1), 1);
        batch.push_headers(Some(&[]));
        // Keys, values and header names and values, as maxBytesPerBatch counts them.
        assert_eq!((batch.len(), batch.bytes), (3, 1 + 3 + 1 + 1 + 3));
        let array = batch.finish();
        let keys = array.column_by_name("key").unwrap().as_binary::<i32>();
        assert_eq!(keys.iter().collect::<Vec<_>>(), [Some(&b"k"[..]), None, Some(&b""[..])]);
        let values = array.column_by_name("value").unwrap().as_binary::<i32>();
        assert_eq!(values.iter().collect::<Vec<_>>(), [None, Some(&b"val"[..]), Some(&b""[..])]);
        let offsets = array.column_by_name("offset").unwrap().as_primitive::<Int64Type>();
        assert_eq!(offsets.values().as_ref(), [5, 6, 7]);
        let timestamps = array.column_by_name("timestamp").unwrap().as_primitive::<TimestampMicrosecondType>();
        assert_eq!(timestamps.iter().collect::<Vec<_>>(), [Some(1_000), None, Some(-1)]);
        assert_eq!(timestamps.timezone(), Some("UTC"));
        let types = array.column_by_name("timestampType").unwrap().as_primitive::<Int32Type>();
        assert_eq!(types.values().as_ref(), [0, 2, 1]);
        let headers = array.column_by_name("headers").unwrap().as_list::<i32>();
        assert_eq!((headers.is_null(1), headers.value_offsets()), (true, &[0, 2, 2, 2][..]));
        let entries = headers.values().as_struct();
        let names = entries.column(0).as_binary::<i32>();
        let header_values = entries.column(1).as_binary::<i32>();
        assert_eq!(names.iter().collect::<Vec<_>>(), [Some(&b"h"[..]), Some(&b"nil"[..])]);
        assert_eq!(header_values.iter().collect::<Vec<_>>(), [Some(&b"v"[..]), None]);
    }

    #[test]
    fn a_batch_without_headers_has_no_headers_column() {
        let mut batch = BatchBuilder::new(false);
        batch.push_record(Some(b"k"), Some(b"v"), 1, Some(1), 0);
        batch.push_headers(Some(&[(b"h", None)]));
        let array = batch.finish();
        assert_eq!((array.num_columns(), array.column_by_name("headers").is_none(), batch_bytes(&array)), (5, true, 2));
    }

    fn batch_bytes(array: &StructArray) -> usize {
        ["key", "value"]
            .iter()
            .map(|name| array.column_by_name(name).unwrap().as_binary::<i32>().value_data().len())
            .sum()
    }

    #[test]
    fn a_batch_sized_like_another_starts_empty() {
        let mut full = BatchBuilder::new(true);
        full.push_record(Some(b"k"), Some(b"v"), 1, Some(1), 0);
        let next = BatchBuilder::sized_like(&full);
        assert_eq!((next.len(), next.bytes, next.headers.is_some()), (0, 0, true));
    }

    #[test]
    fn an_exported_batch_reads_back_through_the_c_data_interface() {
        let mut batch = BatchBuilder::new(true);
        batch.push_record(Some(b"k"), None, 5, Some(1_000), 0);
        batch.push_headers(Some(&[(b"h", Some(b"v"))]));
        let array = batch.finish();
        let (exported, schema) = to_ffi(&array.to_data()).unwrap();
        // SAFETY: both structs were just exported by arrow-rs and are imported once.
        let imported = unsafe { arrow_array::ffi::from_ffi(exported, &schema) }.unwrap();
        assert_eq!(StructArray::from(imported), array);
    }
}
