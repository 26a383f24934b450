//! Strings across the C boundary: librdkafka's NUL-terminated ones copied into Rust, and settings handed to it.

use std::ffi::{c_char, CStr, CString};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// # Safety
/// `text` is null or a NUL-terminated string.
pub unsafe fn c_text(text: *const c_char) -> String {
    if text.is_null() {
        String::new()
    } else {
        CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}

pub fn c_string(text: &str) -> PyResult<CString> {
    CString::new(text).map_err(|_| PyValueError::new_err("a librdkafka setting contains a NUL character"))
}
