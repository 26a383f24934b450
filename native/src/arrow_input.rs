//! Arrow arrays lent by Python for the length of one call through Arrow's C data interface
//! (`__arrow_c_array__`: a schema and an array capsule). Each column is validated once, when it is
//! taken: its type (an unknown one is a `TypeError`, never a misread), its length, and every offset it
//! uses (non-decreasing, within the buffer they index), so that reading a row afterwards is plain,
//! bounds-checked slicing.

use std::ffi::{c_char, c_void, CStr};
use std::slice;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// `struct ArrowSchema` of the C data interface.
#[repr(C)]
pub struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

/// `struct ArrowArray` of the C data interface.
#[repr(C)]
pub struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

/// One column as `__arrow_c_array__` returns it: (schema capsule, array capsule).
pub type Exported<'py> = (Bound<'py, PyCapsule>, Bound<'py, PyCapsule>);

/// A schema and its array, borrowed from capsules that outlive `'a`.
#[derive(Clone, Copy)]
struct Node<'a> {
    schema: &'a ArrowSchema,
    array: &'a ArrowArray,
}

impl<'a> Node<'a> {
    fn of(exported: &'a Exported<'_>, column: &str) -> PyResult<Self> {
        let (schema, array) = exported;
        let schema = capsule_pointer::<ArrowSchema>(schema, c"arrow_schema", column)?;
        let array = capsule_pointer::<ArrowArray>(array, c"arrow_array", column)?;
        // SAFETY: the capsules hold the structs for as long as the Python objects live, which is the whole call.
        unsafe { Node::new(&*schema, &*array, column) }
    }

    /// # Safety
    /// Unless released (which is checked), the structs are valid by the C data interface: every pointer they
    /// hold points at what the interface says, for as long as `'a`.
    unsafe fn new(schema: &'a ArrowSchema, array: &'a ArrowArray, column: &str) -> PyResult<Self> {
        let node = Node { schema, array };
        if node.schema.release.is_none() || node.array.release.is_none() {
            return Err(PyValueError::new_err(format!("column {column}: the Arrow data was already released")));
        }
        node.check_shape(column)?;
        Ok(node)
    }

    fn format(&self) -> &'a str {
        // SAFETY: the C data interface requires a NUL-terminated UTF-8 format string.
        unsafe { CStr::from_ptr(self.schema.format) }.to_str().unwrap_or("?")
    }

    fn name(&self) -> &'a str {
        if self.schema.name.is_null() {
            return "";
        }
        // SAFETY: as `format`.
        unsafe { CStr::from_ptr(self.schema.name) }.to_str().unwrap_or("")
    }

    fn check_shape(&self, column: &str) -> PyResult<()> {
        let (schema, array) = (self.schema, self.array);
        if !schema.dictionary.is_null() || !array.dictionary.is_null() {
            return Err(PyTypeError::new_err(format!(
                "column {column}: a dictionary-encoded array is not supported; decode it first"
            )));
        }
        if array.length < 0
            || array.offset < 0
            || array.n_buffers < 0
            || array.n_children != schema.n_children
            || array.n_children < 0
        {
            return Err(PyValueError::new_err(format!("column {column}: malformed Arrow array (negative length or offset, or children that do not match the schema)")));
        }
        Ok(())
    }

    fn child(&self, index: usize, column: &str) -> PyResult<Node<'a>> {
        // SAFETY: `index` < n_children (checked by the callers), and both child lists hold n_children pointers.
        let node =
            unsafe { Node { schema: &**self.schema.children.add(index), array: &**self.array.children.add(index) } };
        node.check_shape(column)?;
        Ok(node)
    }

    /// Buffer `index`, which must exist; null only where `may_be_null`.
    fn buffer(&self, index: usize, may_be_null: bool, column: &str) -> PyResult<*const u8> {
        if (self.array.n_buffers as usize) <= index {
            return Err(PyValueError::new_err(format!(
                "column {column}: the Arrow array has {} buffers, not {}",
                self.array.n_buffers,
                index + 1
            )));
        }
        // SAFETY: index < n_buffers.
        let pointer = unsafe { *self.array.buffers.add(index) } as *const u8;
        if pointer.is_null() && !may_be_null {
            return Err(PyValueError::new_err(format!("column {column}: the Arrow array's buffer {index} is missing")));
        }
        Ok(pointer)
    }

    /// The validity bitmap covering slots `[0, offset + length)`, or None when every slot is valid.
    fn validity(&self, column: &str) -> PyResult<Option<&'a [u8]>> {
        let bitmap = self.buffer(0, true, column)?;
        if bitmap.is_null() {
            if self.array.null_count != 0 {
                return Err(PyValueError::new_err(format!(
                    "column {column}: {} nulls but no validity bitmap",
                    self.array.null_count
                )));
            }
            return Ok(None);
        }
        let slots = (self.array.offset + self.array.length) as usize;
        // SAFETY: a validity bitmap holds at least one bit per slot of the array.
        Ok(Some(unsafe { slice::from_raw_parts(bitmap, slots.div_ceil(8)) }))
    }
}

fn capsule_pointer<T>(capsule: &Bound<'_, PyCapsule>, expected: &CStr, column: &str) -> PyResult<*const T> {
    if capsule.name()? != Some(expected) {
        return Err(PyTypeError::new_err(format!(
            "column {column}: expected an {} capsule (__arrow_c_array__)",
            expected.to_string_lossy()
        )));
    }
    let pointer = capsule.pointer() as *const T;
    if pointer.is_null() {
        return Err(PyValueError::new_err(format!("column {column}: an empty {} capsule", expected.to_string_lossy())));
    }
    Ok(pointer)
}

fn is_valid(validity: Option<&[u8]>, index: usize) -> bool {
    validity.is_none_or(|bits| (bits[index / 8] >> (index % 8)) & 1 == 1)
}

/// An offsets buffer's entries for slots `[first, first + count]`, checked non-decreasing and non-negative.
enum Offsets<'a> {
    Small(&'a [i32]),
    Large(&'a [i64]),
}

impl<'a> Offsets<'a> {
    fn read(node: &Node<'a>, large: bool, first: usize, count: usize, column: &str) -> PyResult<Self> {
        let pointer = node.buffer(1, false, column)?;
        // SAFETY: an offsets buffer holds offset + length + 1 entries; the callers ask for at most that many.
        let offsets = unsafe {
            if large {
                Offsets::Large(slice::from_raw_parts((pointer as *const i64).add(first), count + 1))
            } else {
                Offsets::Small(slice::from_raw_parts((pointer as *const i32).add(first), count + 1))
            }
        };
        let ordered = match &offsets {
            Offsets::Small(values) => values[0] >= 0 && values.windows(2).all(|pair| pair[0] <= pair[1]),
            Offsets::Large(values) => values[0] >= 0 && values.windows(2).all(|pair| pair[0] <= pair[1]),
        };
        if !ordered {
            return Err(PyValueError::new_err(format!("column {column}: its Arrow offsets go backwards or below 0")));
        }
        Ok(offsets)
    }

    /// `[start, end)` of slot `index` (relative to the first slot read).
    fn range(&self, index: usize) -> (usize, usize) {
        match self {
            Offsets::Small(values) => (values[index] as usize, values[index + 1] as usize),
            Offsets::Large(values) => (values[index] as usize, values[index + 1] as usize),
        }
    }

    fn last(&self) -> usize {
        match self {
            Offsets::Small(values) => values[values.len() - 1] as usize,
            Offsets::Large(values) => values[values.len() - 1] as usize,
        }
    }
}

/// A binary or UTF-8 string column (32- or 64-bit offsets), `len` rows from slot `first`.
pub struct Binary<'a> {
    validity: Option<&'a [u8]>,
    first: usize,
    offsets: Offsets<'a>,
    data: &'a [u8],
    len: usize,
}

impl<'a> Binary<'a> {
    /// The top-level column `exported`, which must hold exactly `rows` rows.
    pub fn take(exported: &'a Exported<'_>, column: &str, rows: usize) -> PyResult<Self> {
        Self::from_node(Node::of(exported, column)?, column, rows)
    }

    fn from_node(node: Node<'a>, column: &str, rows: usize) -> PyResult<Self> {
        check_rows(&node, column, rows)?;
        Binary::of(&node, node.array.offset as usize, rows, column)
    }

    /// Slots `[first, first + len)` of `node`, a binary or string array.
    fn of(node: &Node<'a>, first: usize, len: usize, column: &str) -> PyResult<Self> {
        let large = match node.format() {
            "z" | "u" => false,
            "Z" | "U" => true,
            other => return Err(unsupported(column, other, "binary or string (32- or 64-bit offsets)")),
        };
        if first + len > (node.array.offset + node.array.length) as usize {
            return Err(PyValueError::new_err(format!("column {column}: rows past the end of its Arrow array")));
        }
        let offsets = Offsets::read(node, large, first, len, column)?;
        let data = node.buffer(2, offsets.last() == 0, column)?;
        // SAFETY: the data buffer holds at least as many bytes as the last offset says.
        let data = if data.is_null() { &[][..] } else { unsafe { slice::from_raw_parts(data, offsets.last()) } };
        Ok(Binary { validity: node.validity(column)?, first, offsets, data, len })
    }

    pub fn get(&self, row: usize) -> Option<&'a [u8]> {
        assert!(row < self.len, "row {row} of a column of {} rows", self.len);
        if !is_valid(self.validity, self.first + row) {
            return None;
        }
        let (start, end) = self.offsets.range(row);
        Some(&self.data[start..end])
    }
}

/// An int32 column.
pub struct Int32<'a> {
    validity: Option<&'a [u8]>,
    first: usize,
    values: &'a [i32],
}

impl<'a> Int32<'a> {
    pub fn take(exported: &'a Exported<'_>, column: &str, rows: usize) -> PyResult<Self> {
        Self::from_node(Node::of(exported, column)?, column, rows)
    }

    fn from_node(node: Node<'a>, column: &str, rows: usize) -> PyResult<Self> {
        check_rows(&node, column, rows)?;
        if node.format() != "i" {
            return Err(unsupported(column, node.format(), "int32"));
        }
        let values = node.buffer(1, rows == 0, column)?;
        let first = node.array.offset as usize;
        // SAFETY: an int32 array's values buffer holds offset + length values.
        let values = if values.is_null() {
            &[][..]
        } else {
            unsafe { slice::from_raw_parts((values as *const i32).add(first), rows) }
        };
        Ok(Int32 { validity: node.validity(column)?, first, values })
    }

    pub fn get(&self, row: usize) -> Option<i32> {
        is_valid(self.validity, self.first + row).then(|| self.values[row])
    }
}

/// `list<struct<key: string, value: binary>>` (32- or 64-bit list offsets): each row's entries are a range
/// of `keys` and `values`.
pub struct Headers<'a> {
    validity: Option<&'a [u8]>,
    first: usize,
    offsets: Offsets<'a>,
    pub keys: Binary<'a>,
    pub values: Binary<'a>,
}

impl<'a> Headers<'a> {
    pub fn take(exported: &'a Exported<'_>, column: &str, rows: usize) -> PyResult<Self> {
        Self::from_node(Node::of(exported, column)?, column, rows)
    }

    fn from_node(node: Node<'a>, column: &str, rows: usize) -> PyResult<Self> {
        check_rows(&node, column, rows)?;
        let expected = "list<struct<key: string, value: binary>>";
        let large = match node.format() {
            "+l" => false,
            "+L" => true,
            other => return Err(unsupported(column, other, expected)),
        };
        if node.array.n_children != 1 {
            return Err(unsupported(column, node.format(), expected));
        }
        let first = node.array.offset as usize;
        let offsets = Offsets::read(&node, large, first, rows, column)?;
        let entries = node.child(0, column)?;
        if entries.format() != "+s" || entries.array.n_children != 2 {
            return Err(unsupported(column, entries.format(), expected));
        }
        // The list's offsets index the struct's slots, which start at the struct's own offset; the struct's
        // offset applies to its children's slots too.
        let (base, used) = (entries.array.offset as usize, offsets.last());
        if used > entries.array.length as usize {
            return Err(PyValueError::new_err(format!("column {column}: its list offsets point past its entries")));
        }
        let (key, value) = (entries.child(0, column)?, entries.child(1, column)?);
        if (key.name(), value.name()) != ("key", "value") {
            return Err(unsupported(column, "+s", expected));
        }
        let keys = Binary::of(&key, key.array.offset as usize + base, used, column)?;
        let values = Binary::of(&value, value.array.offset as usize + base, used, column)?;
        Ok(Headers { validity: node.validity(column)?, first, offsets, keys, values })
    }

    /// The range of a row's entries in `keys` and `values`; empty for a null row.
    pub fn entries(&self, row: usize) -> std::ops::Range<usize> {
        if !is_valid(self.validity, self.first + row) {
            return 0..0;
        }
        let (start, end) = self.offsets.range(row);
        start..end
    }
}

/// The number of rows of the column `exported`.
pub fn rows_of(exported: &Exported<'_>, column: &str) -> PyResult<usize> {
    Ok(Node::of(exported, column)?.array.length as usize)
}

fn check_rows(node: &Node<'_>, column: &str, rows: usize) -> PyResult<()> {
    if node.array.length as usize != rows {
        return Err(PyValueError::new_err(format!("column {column} has {} rows, the batch {rows}", node.array.length)));
    }
    Ok(())
}

fn unsupported(column: &str, format: &str, expected: &str) -> PyErr {
    PyTypeError::new_err(format!("column {column}: Arrow type '{format}' is not supported here; expected {expected}"))
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::ptr;

    use super::*;
    use crate::arrow_buffers::Header;

    unsafe extern "C" fn release_schema(_: *mut ArrowSchema) {}
    unsafe extern "C" fn release_array(_: *mut ArrowArray) {}

    /// An array of the C data interface and everything its structs point at, kept alive together.
    struct TestArray {
        schema: Box<ArrowSchema>,
        array: Box<ArrowArray>,
        _strings: (CString, CString),
        _storage: Vec<Vec<u64>>,
        _buffers: Vec<*const c_void>,
        _children: Vec<TestArray>,
        _child_pointers: (Vec<*mut ArrowSchema>, Vec<*mut ArrowArray>),
    }

    impl TestArray {
        fn new(format: &str, name: &str, length: usize, null_count: usize, buffers: Vec<Option<Vec<u8>>>) -> Self {
            TestArray::with_children(format, name, length, null_count, buffers, Vec::new())
        }

        fn with_children(
            format: &str,
            name: &str,
            length: usize,
            null_count: usize,
            buffers: Vec<Option<Vec<u8>>>,
            mut children: Vec<TestArray>,
        ) -> Self {
            let strings = (CString::new(format).unwrap(), CString::new(name).unwrap());
            // Arrow buffers are aligned: keep the bytes in 8-byte words.
            let storage: Vec<Vec<u64>> = buffers.iter().flatten().map(|bytes| aligned(bytes)).collect();
            let mut stored = storage.iter();
            let mut pointers: Vec<*const c_void> = buffers
                .iter()
                .map(|buffer| match buffer {
                    Some(_) => stored.next().unwrap().as_ptr().cast(),
                    None => ptr::null(),
                })
                .collect();
            let mut schemas: Vec<*mut ArrowSchema> = children.iter_mut().map(|c| &mut *c.schema as *mut _).collect();
            let mut arrays: Vec<*mut ArrowArray> = children.iter_mut().map(|c| &mut *c.array as *mut _).collect();
            let schema = Box::new(ArrowSchema {
                format: strings.0.as_ptr(),
                name: strings.1.as_ptr(),
                metadata: ptr::null(),
                flags: 0,
                n_children: children.len() as i64,
                children: schemas.as_mut_ptr(),
                dictionary: ptr::null_mut(),
                release: Some(release_schema),
                private_data: ptr::null_mut(),
            });
            let array = Box::new(ArrowArray {
                length: length as i64,
                null_count: null_count as i64,
                offset: 0,
                n_buffers: pointers.len() as i64,
                n_children: children.len() as i64,
                buffers: pointers.as_mut_ptr(),
                children: arrays.as_mut_ptr(),
                dictionary: ptr::null_mut(),
                release: Some(release_array),
                private_data: ptr::null_mut(),
            });
            TestArray {
                schema,
                array,
                _strings: strings,
                _storage: storage,
                _buffers: pointers,
                _children: children,
                _child_pointers: (schemas, arrays),
            }
        }

        fn node(&self) -> PyResult<Node<'_>> {
            // SAFETY: every pointer points into this TestArray, which outlives the node.
            unsafe { Node::new(&self.schema, &self.array, "c") }
        }
    }

    fn aligned(bytes: &[u8]) -> Vec<u64> {
        let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)];
        // SAFETY: the words hold at least bytes.len() bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr().cast::<u8>(), bytes.len()) };
        words
    }

    fn validity(valid: &[bool]) -> Vec<u8> {
        let mut bits = vec![0u8; valid.len().div_ceil(8).max(1)];
        for (index, _) in valid.iter().enumerate().filter(|(_, &v)| v) {
            bits[index / 8] |= 1 << (index % 8);
        }
        bits
    }

    fn offsets_buffer(offsets: &[i64], large: bool) -> Vec<u8> {
        if large {
            offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
        } else {
            offsets.iter().flat_map(|&o| (o as i32).to_le_bytes()).collect()
        }
    }

    /// A binary or string column of `format` ("z", "Z", "u", "U").
    fn binary(format: &str, name: &str, values: &[Option<&[u8]>]) -> TestArray {
        let mut offsets = vec![0i64];
        let mut data = Vec::new();
        for value in values {
            data.extend_from_slice(value.unwrap_or_default());
            offsets.push(data.len() as i64);
        }
        let valid: Vec<bool> = values.iter().map(Option::is_some).collect();
        let nulls = valid.iter().filter(|v| !**v).count();
        let large = matches!(format, "Z" | "U");
        let buffers = vec![(nulls > 0).then(|| validity(&valid)), Some(offsets_buffer(&offsets, large)), Some(data)];
        TestArray::new(format, name, values.len(), nulls, buffers)
    }

    /// `list<struct<key: string, value: binary>>` (or `list_format` in place of "+l").
    fn headers(list_format: &str, rows: &[Option<&[Header<'_>]>]) -> TestArray {
        let entries: Vec<&Header<'_>> = rows.iter().flatten().flat_map(|row| row.iter()).collect();
        let keys: Vec<Option<&[u8]>> = entries.iter().map(|(key, _)| Some(*key)).collect();
        let values: Vec<Option<&[u8]>> = entries.iter().map(|(_, value)| *value).collect();
        let entries = TestArray::with_children(
            "+s",
            "entries",
            keys.len(),
            0,
            vec![None],
            vec![binary("u", "key", &keys), binary("z", "value", &values)],
        );
        let mut offsets = vec![0i64];
        for row in rows {
            offsets.push(offsets.last().unwrap() + row.map_or(0, |entries| entries.len() as i64));
        }
        let valid: Vec<bool> = rows.iter().map(Option::is_some).collect();
        let nulls = valid.iter().filter(|v| !**v).count();
        let buffers = vec![Some(validity(&valid)), Some(offsets_buffer(&offsets, list_format == "+L"))];
        TestArray::with_children(list_format, "headers", rows.len(), nulls, buffers, vec![entries])
    }

    fn error_text(err: PyErr) -> String {
        pyo3::prepare_freethreaded_python();
        Python::with_gil(|_| err.to_string())
    }

    fn refusal<T>(result: PyResult<T>) -> String {
        match result {
            Ok(_) => panic!("expected an error"),
            Err(err) => error_text(err),
        }
    }

    const VALUES: [Option<&[u8]>; 4] = [Some(b"a"), None, Some(b""), Some(b"xyz")];

    #[test]
    fn binary_and_string_columns_of_both_offset_widths_are_read_with_their_nulls() {
        for format in ["z", "Z", "u", "U"] {
            let array = binary(format, "value", &VALUES);
            let column = Binary::from_node(array.node().unwrap(), "value", 4).unwrap();
            let read: Vec<Option<&[u8]>> = (0..4).map(|row| column.get(row)).collect();
            assert_eq!(read, VALUES, "format {format}");
        }
    }

    #[test]
    fn a_sliced_array_is_read_from_its_offset() {
        let mut array = binary("z", "value", &VALUES);
        array.array.offset = 1;
        array.array.length = 3;
        let column = Binary::from_node(array.node().unwrap(), "value", 3).unwrap();
        assert_eq!((0..3).map(|row| column.get(row)).collect::<Vec<_>>(), VALUES[1..]);
    }

    #[test]
    fn offsets_that_go_backwards_are_refused() {
        let buffers = vec![None, Some(offsets_buffer(&[0, 5, 2, 6], false)), Some(b"abcdef".to_vec())];
        let array = TestArray::new("z", "value", 3, 0, buffers);
        let message = refusal(Binary::from_node(array.node().unwrap(), "value", 3));
        assert_eq!(message, "ValueError: column value: its Arrow offsets go backwards or below 0");
    }

    #[test]
    fn a_column_of_another_length_than_the_batch_is_refused() {
        let array = binary("z", "key", &VALUES);
        let message = refusal(Binary::from_node(array.node().unwrap(), "key", 5));
        assert_eq!(message, "ValueError: column key has 4 rows, the batch 5");
    }

    #[test]
    fn other_types_are_type_errors_never_misreads() {
        let int64 = TestArray::new("l", "partition", 1, 0, vec![None, Some(7i64.to_le_bytes().to_vec())]);
        assert!(refusal(Int32::from_node(int64.node().unwrap(), "partition", 1))
            .starts_with("TypeError: column partition: Arrow type 'l' is not supported here; expected int32"));
        assert!(refusal(Binary::from_node(int64.node().unwrap(), "value", 1)).starts_with("TypeError: column value"));
        let entries: &[Header<'_>] = &[(b"h", Some(b"1"))];
        for format in ["+w:1", "+vl", "+vL"] {
            let array = headers(format, &[Some(entries)]);
            let message = refusal(Headers::from_node(array.node().unwrap(), "headers", 1));
            assert!(message.starts_with("TypeError: column headers: Arrow type"), "{format}: {message}");
        }
    }

    #[test]
    fn a_dictionary_encoded_or_released_array_is_refused() {
        let dictionary = binary("z", "value", &VALUES);
        let mut encoded = TestArray::new("i", "value", 0, 0, vec![None, None]);
        encoded.schema.dictionary = &*dictionary.schema as *const ArrowSchema as *mut ArrowSchema;
        assert!(refusal(encoded.node()).starts_with("TypeError: column c: a dictionary-encoded array is not supported"));
        let mut released = binary("z", "value", &VALUES);
        released.array.release = None;
        assert_eq!(refusal(released.node()), "ValueError: column c: the Arrow data was already released");
    }

    #[test]
    fn headers_of_both_list_offset_widths_give_each_row_its_entries() {
        let first: &[Header<'_>] = &[(b"h", Some(b"1")), (b"nil", None)];
        let third: &[Header<'_>] = &[(b"", Some(b""))];
        for format in ["+l", "+L"] {
            let array = headers(format, &[Some(first), None, Some(third), Some(&[])]);
            let column = Headers::from_node(array.node().unwrap(), "headers", 4).unwrap();
            assert_eq!(
                [column.entries(0), column.entries(1), column.entries(2), column.entries(3)],
                [0..2, 0..0, 2..3, 3..3]
            );
            let pairs: Vec<_> = (0..3).map(|entry| (column.keys.get(entry), column.values.get(entry))).collect();
            assert_eq!(
                pairs,
                [(Some(&b"h"[..]), Some(&b"1"[..])), (Some(&b"nil"[..]), None), (Some(&b""[..]), Some(&b""[..]))]
            );
        }
    }
}
