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
        // SAFETY: the capsules hold live, unreleased structs (checked by name and release callback) for as
        // long as the Python objects live, which is the whole call.
        let node = unsafe { Node { schema: &*schema, array: &*array } };
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
            return Err(PyTypeError::new_err(format!("column {column}: a dictionary-encoded array is not supported; decode it first")));
        }
        if array.length < 0 || array.offset < 0 || array.n_buffers < 0 || array.n_children != schema.n_children || array.n_children < 0 {
            return Err(PyValueError::new_err(format!("column {column}: malformed Arrow array (negative length or offset, or children that do not match the schema)")));
        }
        Ok(())
    }

    fn child(&self, index: usize, column: &str) -> PyResult<Node<'a>> {
        // SAFETY: `index` < n_children (checked by the callers), and both child lists hold n_children pointers.
        let node = unsafe { Node { schema: &**self.schema.children.add(index), array: &**self.array.children.add(index) } };
        node.check_shape(column)?;
        Ok(node)
    }

    /// Buffer `index`, which must exist; null only where `may_be_null`.
    fn buffer(&self, index: usize, may_be_null: bool, column: &str) -> PyResult<*const u8> {
        if (self.array.n_buffers as usize) <= index {
            return Err(PyValueError::new_err(format!("column {column}: the Arrow array has {} buffers, not {}", self.array.n_buffers, index + 1)));
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
                return Err(PyValueError::new_err(format!("column {column}: {} nulls but no validity bitmap", self.array.null_count)));
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
        return Err(PyTypeError::new_err(format!("column {column}: expected an {} capsule (__arrow_c_array__)", expected.to_string_lossy())));
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
        let node = Node::of(exported, column)?;
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
        let node = Node::of(exported, column)?;
        check_rows(&node, column, rows)?;
        if node.format() != "i" {
            return Err(unsupported(column, node.format(), "int32"));
        }
        let values = node.buffer(1, rows == 0, column)?;
        let first = node.array.offset as usize;
        // SAFETY: an int32 array's values buffer holds offset + length values.
        let values = if values.is_null() { &[][..] } else { unsafe { slice::from_raw_parts((values as *const i32).add(first), rows) } };
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
        let node = Node::of(exported, column)?;
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
