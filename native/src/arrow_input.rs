//! Arrow arrays lent by Python for one `produce` call through Arrow's C data interface (`__arrow_c_array__`: a
//! schema and an array capsule), imported with arrow-rs. Each column's type is checked from its schema first (an
//! unknown one is a `TypeError` naming it, never a misread), then the array is moved out of its capsule, as the
//! PyCapsule protocol lets a consumer, and validated in full once (lengths, offsets, UTF-8), so that reading a row
//! afterwards is plain, bounds-checked access. The columns own what they imported: they may be read without the GIL.

use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{make_array, Array, ArrayRef, BinaryArray, Int32Array, LargeBinaryArray, OffsetSizeTrait};
use arrow_schema::DataType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// One column as `__arrow_c_array__` returns it: (schema capsule, array capsule).
pub type Exported<'py> = (Bound<'py, PyCapsule>, Bound<'py, PyCapsule>);

const BINARY: &str = "binary or string (32- or 64-bit offsets)";
const HEADERS: &str = "list<struct<key: string, value: binary>>";

/// Moves the array out of `exported` once its schema shows `accepted` takes its type; validates it in full, and
/// that it holds `rows` rows if given.
fn import(
    exported: &Exported<'_>,
    column: &str,
    rows: Option<usize>,
    expected: &str,
    accepted: fn(&DataType) -> bool,
) -> PyResult<ArrayRef> {
    let (schema, array) = exported;
    let schema = capsule_pointer::<FFI_ArrowSchema>(schema, c"arrow_schema", column)?;
    let array = capsule_pointer::<FFI_ArrowArray>(array, c"arrow_array", column)?;
    // SAFETY: capsules of these names hold the interface's structs, alive as long as the Python objects, which
    // outlive the call.
    let (schema, released) = unsafe { (&*schema, (*array).is_released()) };
    if released {
        return Err(PyValueError::new_err(format!("column {column}: the Arrow data was already released")));
    }
    let array = import_structs(schema, || unsafe { FFI_ArrowArray::from_raw(array) }, column, expected, accepted)?;
    check_rows(column, &array, rows)?;
    Ok(array)
}

/// The checks and import of [`import`], on the structs themselves; `take` moves the array out once the type is accepted.
fn import_structs(
    schema: &FFI_ArrowSchema,
    take: impl FnOnce() -> FFI_ArrowArray,
    column: &str,
    expected: &str,
    accepted: fn(&DataType) -> bool,
) -> PyResult<ArrayRef> {
    if schema.dictionary().is_some() {
        return Err(PyTypeError::new_err(format!(
            "column {column}: a dictionary-encoded array is not supported; decode it first"
        )));
    }
    let data_type = DataType::try_from(schema).ok().filter(accepted);
    if data_type.is_none() {
        return Err(PyTypeError::new_err(format!(
            "column {column}: Arrow type '{}' is not supported here; expected {expected}",
            schema.format()
        )));
    }
    // SAFETY: the structs follow the C data interface (their exporter's promise), and the type was read from them.
    let data = unsafe { from_ffi(take(), schema) }.map_err(|err| malformed(column, err))?;
    data.validate_full().map_err(|err| malformed(column, err))?;
    Ok(make_array(data))
}

fn malformed(column: &str, err: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("column {column}: its Arrow data is malformed ({err})"))
}

fn capsule_pointer<T>(capsule: &Bound<'_, PyCapsule>, expected: &std::ffi::CStr, column: &str) -> PyResult<*mut T> {
    if capsule.name()? != Some(expected) {
        return Err(PyTypeError::new_err(format!(
            "column {column}: expected an {} capsule (__arrow_c_array__)",
            expected.to_string_lossy()
        )));
    }
    let pointer = capsule.pointer() as *mut T;
    if pointer.is_null() {
        return Err(PyValueError::new_err(format!("column {column}: an empty {} capsule", expected.to_string_lossy())));
    }
    Ok(pointer)
}

fn check_rows(column: &str, array: &dyn Array, rows: Option<usize>) -> PyResult<()> {
    match rows {
        Some(rows) if array.len() != rows => {
            Err(PyValueError::new_err(format!("column {column} has {} rows, the batch {rows}", array.len())))
        }
        _ => Ok(()),
    }
}

fn is_binary(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Binary | DataType::LargeBinary | DataType::Utf8 | DataType::LargeUtf8)
}

/// A binary or UTF-8 string column (32- or 64-bit offsets), read as bytes.
pub enum Binary {
    Small(BinaryArray),
    Large(LargeBinaryArray),
}

impl Binary {
    /// The column `exported`, which must hold `rows` rows if given.
    pub fn take(exported: &Exported<'_>, column: &str, rows: Option<usize>) -> PyResult<Self> {
        Ok(Binary::of(&import(exported, column, rows, BINARY, is_binary)?))
    }

    /// `array`, whose type [`is_binary`]; a string array's bytes are shared, not copied.
    fn of(array: &ArrayRef) -> Self {
        match array.data_type() {
            DataType::Binary => Binary::Small(array.as_binary::<i32>().clone()),
            DataType::LargeBinary => Binary::Large(array.as_binary::<i64>().clone()),
            DataType::Utf8 => Binary::Small(BinaryArray::from(array.as_string::<i32>().clone())),
            _ => Binary::Large(LargeBinaryArray::from(array.as_string::<i64>().clone())),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Binary::Small(array) => array.len(),
            Binary::Large(array) => array.len(),
        }
    }

    pub fn get(&self, row: usize) -> Option<&[u8]> {
        match self {
            Binary::Small(array) => array.is_valid(row).then(|| array.value(row)),
            Binary::Large(array) => array.is_valid(row).then(|| array.value(row)),
        }
    }
}

/// An int32 column.
pub struct Int32(Int32Array);

impl Int32 {
    pub fn take(exported: &Exported<'_>, column: &str, rows: Option<usize>) -> PyResult<Self> {
        let array = import(exported, column, rows, "int32", |data_type| *data_type == DataType::Int32)?;
        Ok(Int32(array.as_primitive().clone()))
    }

    pub fn get(&self, row: usize) -> Option<i32> {
        self.0.is_valid(row).then(|| self.0.value(row))
    }
}

/// `list<struct<key: string, value: binary>>` (32- or 64-bit list offsets): each row's entries are a range of
/// `keys` and `values`.
pub struct Headers {
    entries: Vec<Range<usize>>,
    pub keys: Binary,
    pub values: Binary,
}

fn is_headers(data_type: &DataType) -> bool {
    let (DataType::List(item) | DataType::LargeList(item)) = data_type else { return false };
    let DataType::Struct(fields) = item.data_type() else { return false };
    fields.len() == 2
        && (fields[0].name().as_str(), fields[1].name().as_str()) == ("key", "value")
        && fields.iter().all(|field| is_binary(field.data_type()))
}

/// Each row's range of entries; empty for a null row.
fn entry_ranges<O: OffsetSizeTrait>(list: &arrow_array::GenericListArray<O>) -> Vec<Range<usize>> {
    let offsets = list.value_offsets();
    (0..list.len())
        .map(|row| if list.is_valid(row) { offsets[row].as_usize()..offsets[row + 1].as_usize() } else { 0..0 })
        .collect()
}

impl Headers {
    pub fn take(exported: &Exported<'_>, column: &str, rows: Option<usize>) -> PyResult<Self> {
        Ok(Headers::of(&import(exported, column, rows, HEADERS, is_headers)?))
    }

    /// `array`, whose type [`is_headers`].
    fn of(array: &ArrayRef) -> Self {
        let (entries, items) = match array.data_type() {
            DataType::List(_) => (entry_ranges(array.as_list::<i32>()), array.as_list::<i32>().values().clone()),
            _ => (entry_ranges(array.as_list::<i64>()), array.as_list::<i64>().values().clone()),
        };
        let items = items.as_struct();
        Headers { entries, keys: Binary::of(items.column(0)), values: Binary::of(items.column(1)) }
    }

    /// The range of a row's entries in `keys` and `values`; empty for a null row.
    pub fn entries(&self, row: usize) -> Range<usize> {
        self.entries[row].clone()
    }
}

/// The sink's columns of one batch, imported and validated: `values`, and each optional column with as many rows.
pub struct Columns {
    pub values: Binary,
    pub topics: Option<Binary>,
    pub keys: Option<Binary>,
    pub partitions: Option<Int32>,
    pub headers: Option<Headers>,
}

impl Columns {
    pub fn take(
        topics: Option<Exported<'_>>,
        values: Exported<'_>,
        keys: Option<Exported<'_>>,
        partitions: Option<Exported<'_>>,
        headers: Option<Exported<'_>>,
    ) -> PyResult<Self> {
        let values = Binary::take(&values, "value", None)?;
        let rows = Some(values.len());
        Ok(Columns {
            values,
            topics: topics.as_ref().map(|column| Binary::take(column, "topic", rows)).transpose()?,
            keys: keys.as_ref().map(|column| Binary::take(column, "key", rows)).transpose()?,
            partitions: partitions.as_ref().map(|column| Int32::take(column, "partition", rows)).transpose()?,
            headers: headers.as_ref().map(|column| Headers::take(column, "headers", rows)).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{BinaryBuilder, GenericListBuilder, StringBuilder, StructBuilder};
    use arrow_array::ffi::to_ffi;
    use arrow_array::types::Int32Type;
    use arrow_array::{DictionaryArray, FixedSizeListArray, Int64Array, LargeStringArray, ListArray, StringArray};
    use arrow_buffer::Buffer;
    use arrow_data::ArrayData;
    use arrow_schema::{Field, Fields};

    use super::*;

    /// `array` through the C data interface into [`import_structs`].
    fn imported(
        array: &dyn Array,
        column: &str,
        expected: &str,
        accepted: fn(&DataType) -> bool,
    ) -> PyResult<ArrayRef> {
        let (exported, schema) = to_ffi(&array.to_data()).unwrap();
        import_structs(&schema, || exported, column, expected, accepted)
    }

    fn refusal<T>(result: PyResult<T>) -> String {
        match result {
            Ok(_) => panic!("expected an error"),
            Err(err) => {
                pyo3::prepare_freethreaded_python();
                Python::with_gil(|_| err.to_string())
            }
        }
    }

    const VALUES: [Option<&[u8]>; 4] = [Some(b"a"), None, Some(b""), Some(b"xyz")];

    fn texts() -> Vec<Option<&'static str>> {
        VALUES.iter().map(|value| value.map(|bytes| std::str::from_utf8(bytes).unwrap())).collect()
    }

    fn read(column: &Binary) -> Vec<Option<&[u8]>> {
        (0..column.len()).map(|row| column.get(row)).collect()
    }

    #[test]
    fn binary_and_string_columns_of_both_offset_widths_are_read_with_their_nulls() {
        let arrays: [ArrayRef; 4] = [
            Arc::new(BinaryArray::from(VALUES.to_vec())),
            Arc::new(LargeBinaryArray::from(VALUES.to_vec())),
            Arc::new(StringArray::from(texts())),
            Arc::new(LargeStringArray::from(texts())),
        ];
        for array in arrays {
            let column = Binary::of(&imported(&array, "value", BINARY, is_binary).unwrap());
            assert_eq!(read(&column), VALUES, "{}", array.data_type());
        }
    }

    #[test]
    fn a_sliced_array_is_read_from_its_offset() {
        let array = BinaryArray::from(VALUES.to_vec()).slice(1, 3);
        let column = Binary::of(&imported(&array, "value", BINARY, is_binary).unwrap());
        assert_eq!(read(&column), VALUES[1..]);
    }

    #[test]
    fn offsets_that_go_backwards_are_refused() {
        let offsets = Buffer::from_slice_ref([0i32, 5, 2, 6]);
        // SAFETY: not safe to read, on purpose: the import must refuse it before anything reads it.
        let broken = unsafe {
            ArrayData::builder(DataType::Binary)
                .len(3)
                .add_buffer(offsets)
                .add_buffer(Buffer::from(b"abcdef"))
                .build_unchecked()
        };
        let message = refusal(imported(&arrow_array::make_array(broken), "value", BINARY, is_binary));
        assert!(message.starts_with("ValueError: column value: its Arrow data is malformed ("), "{message}");
    }

    #[test]
    fn a_column_of_another_length_than_the_batch_is_refused() {
        let array = BinaryArray::from(VALUES.to_vec());
        assert_eq!(refusal(check_rows("key", &array, Some(5))), "ValueError: column key has 4 rows, the batch 5");
        assert!(check_rows("key", &array, Some(4)).is_ok() && check_rows("key", &array, None).is_ok());
    }

    #[test]
    fn other_types_are_type_errors_never_misreads() {
        let int64 = Int64Array::from(vec![7]);
        assert_eq!(
            refusal(imported(&int64, "partition", "int32", |t| *t == DataType::Int32)),
            "TypeError: column partition: Arrow type 'l' is not supported here; expected int32"
        );
        assert_eq!(
            refusal(imported(&int64, "value", BINARY, is_binary)),
            format!("TypeError: column value: Arrow type 'l' is not supported here; expected {BINARY}")
        );
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["h"]));
        let list_of_strings = ListArray::new(
            Arc::new(Field::new("item", DataType::Utf8, true)),
            arrow_buffer::OffsetBuffer::from_lengths([1]),
            strings.clone(),
            None,
        );
        let fixed_size = FixedSizeListArray::new(Arc::new(Field::new("item", DataType::Utf8, true)), 1, strings, None);
        for array in [&list_of_strings as &dyn Array, &fixed_size] {
            let message = refusal(imported(array, "headers", HEADERS, is_headers));
            assert!(message.starts_with("TypeError: column headers: Arrow type '+"), "{message}");
            assert!(message.ends_with(&format!("expected {HEADERS}")), "{message}");
        }
    }

    #[test]
    fn a_dictionary_encoded_array_is_refused() {
        let encoded: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
        let message = refusal(imported(&encoded, "value", BINARY, is_binary));
        assert_eq!(message, "TypeError: column value: a dictionary-encoded array is not supported; decode it first");
    }

    /// A header as a producer's batch holds it: a string name and a binary value.
    type Entry<'a> = (&'a str, Option<&'a [u8]>);

    fn headers_of<O: OffsetSizeTrait>(rows: &[Option<&[Entry<'_>]>]) -> ArrayRef {
        let fields =
            Fields::from(vec![Field::new("key", DataType::Utf8, true), Field::new("value", DataType::Binary, true)]);
        let mut builder = GenericListBuilder::<O, StructBuilder>::new(StructBuilder::from_fields(fields, 0));
        for row in rows {
            match row {
                None => builder.append_null(),
                Some(entries) => {
                    for (key, value) in entries.iter() {
                        let items = builder.values();
                        items.field_builder::<StringBuilder>(0).unwrap().append_value(key);
                        items.field_builder::<BinaryBuilder>(1).unwrap().append_option(*value);
                        items.append(true);
                    }
                    builder.append(true);
                }
            }
        }
        Arc::new(builder.finish())
    }

    #[test]
    fn headers_of_both_list_offset_widths_give_each_row_its_entries() {
        let first: &[Entry<'_>] = &[("h", Some(b"1")), ("nil", None)];
        let third: &[Entry<'_>] = &[("", Some(b""))];
        let rows = [Some(first), None, Some(third), Some(&[][..])];
        for array in [headers_of::<i32>(&rows), headers_of::<i64>(&rows)] {
            let headers = Headers::of(&imported(&array, "headers", HEADERS, is_headers).unwrap());
            assert_eq!((0..4).map(|row| headers.entries(row)).collect::<Vec<_>>(), [0..2, 0..0, 2..3, 3..3]);
            let (keys, values) = (&headers.keys, &headers.values);
            let pairs: Vec<_> = (0..3).map(|entry| (keys.get(entry), values.get(entry))).collect();
            assert_eq!(
                pairs,
                [(Some(&b"h"[..]), Some(&b"1"[..])), (Some(&b"nil"[..]), None), (Some(&b""[..]), Some(&b""[..]))]
            );
        }
    }
}
