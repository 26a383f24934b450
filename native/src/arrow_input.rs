//! Arrow arrays lent by Python for the length of one call, as buffer addresses (pyarrow's
//! `Buffer.address`): the caller keeps the arrays alive and has checked their types.

use std::slice;

/// A binary or UTF-8 string array (32- or 64-bit offsets): (validity or 0, offsets, data or 0, offset, large).
pub type BinaryArray = (usize, usize, usize, usize, bool);
/// An int32 array: (validity or 0, values, offset).
pub type Int32Array = (usize, usize, usize);
/// A list<struct<key: string, value: binary>> array: (validity or 0, list offsets, offset, keys, values);
/// the keys and values arrays are the struct's children, their offsets already include the struct's.
pub type HeadersArray = (usize, usize, usize, BinaryArray, BinaryArray);

const EMPTY: &[u8] = &[];

unsafe fn is_valid(validity: usize, index: usize) -> bool {
    validity == 0 || (*(validity as *const u8).add(index / 8) >> (index % 8)) & 1 == 1
}

unsafe fn offset_pair(offsets: usize, index: usize, large: bool) -> (usize, usize) {
    if large {
        let offsets = offsets as *const i64;
        (offsets.add(index).read_unaligned() as usize, offsets.add(index + 1).read_unaligned() as usize)
    } else {
        let offsets = offsets as *const i32;
        (offsets.add(index).read_unaligned() as usize, offsets.add(index + 1).read_unaligned() as usize)
    }
}

pub struct Binary(BinaryArray);

impl Binary {
    pub fn new(array: BinaryArray) -> Self {
        Binary(array)
    }

    /// # Safety
    /// `row` is within the array, whose buffers are alive.
    pub unsafe fn get<'a>(&self, row: usize) -> Option<&'a [u8]> {
        let (validity, offsets, data, offset, large) = self.0;
        let index = offset + row;
        if !is_valid(validity, index) {
            return None;
        }
        let (start, end) = offset_pair(offsets, index, large);
        Some(if end == start || data == 0 { EMPTY } else { slice::from_raw_parts((data as *const u8).add(start), end - start) })
    }
}

pub struct Int32(Int32Array);

impl Int32 {
    pub fn new(array: Int32Array) -> Self {
        Int32(array)
    }

    /// # Safety
    /// As [`Binary::get`].
    pub unsafe fn get(&self, row: usize) -> Option<i32> {
        let (validity, values, offset) = self.0;
        let index = offset + row;
        is_valid(validity, index).then(|| (values as *const i32).add(index).read_unaligned())
    }
}

pub struct Headers {
    validity: usize,
    offsets: usize,
    offset: usize,
    pub keys: Binary,
    pub values: Binary,
}

impl Headers {
    pub fn new((validity, offsets, offset, keys, values): HeadersArray) -> Self {
        Headers { validity, offsets, offset, keys: Binary::new(keys), values: Binary::new(values) }
    }

    /// The range of a row's entries in `keys` and `values`; empty for a null row.
    ///
    /// # Safety
    /// As [`Binary::get`].
    pub unsafe fn entries(&self, row: usize) -> std::ops::Range<usize> {
        let index = self.offset + row;
        if !is_valid(self.validity, index) {
            return 0..0;
        }
        let (start, end) = offset_pair(self.offsets, index, false);
        start..end
    }
}
