//! What the consumer and the producer share: a librdkafka handle made from settings, and the state its
//! callbacks hand over to Python (the latest statistics, log lines, and a producer's delivery reports).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::{self, NonNull};
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rdkafka_sys as rd;

use crate::c_strings::{c_string, c_text};
use crate::deliveries::Deliveries;

// librdkafka functions whose error code is taken as a plain integer: librdkafka passes broker error codes
// through unchanged, and rdkafka-sys's enum does not declare them all (an undeclared value in it is
// undefined behaviour).
#[allow(clashing_extern_declarations)]
extern "C" {
    #[link_name = "rd_kafka_err2str"]
    pub fn error_text(err: c_int) -> *const c_char;
    #[link_name = "rd_kafka_err2name"]
    fn error_name_text(err: c_int) -> *const c_char;
}

/// librdkafka's name and description of an error code (`_MSG_TIMED_OUT`, "Local: Message timed out"), for any
/// code: librdkafka answers an unknown one with a name and description of its own.
pub fn error_name(code: i32) -> (String, String) {
    // SAFETY: both return a NUL-terminated string (static, or a thread-local buffer for an unknown code) or NULL,
    // for any integer; c_text copies it at once.
    unsafe { (c_text(error_name_text(code)), c_text(error_text(code))) }
}

/// librdkafka log lines kept between two drains; the rest are dropped.
const MAX_KEPT_LOG_LINES: usize = 1_000;
const ERRSTR_SIZE: usize = 512;

pub type LogLine = (i32, String, String, String);

/// What librdkafka's callbacks hand over; freed only after `rd_kafka_destroy` has joined its threads.
#[derive(Default)]
pub struct Callbacks {
    pub statistics: Mutex<Option<String>>,
    pub logs: Mutex<Vec<LogLine>>,
    pub deliveries: Mutex<Deliveries>,
}

impl Callbacks {
    pub fn take_logs(&self) -> Vec<LogLine> {
        self.logs.lock().map(|mut logs| std::mem::take(&mut *logs)).unwrap_or_default()
    }

    pub fn take_statistics(&self) -> Option<String> {
        self.statistics.lock().ok().and_then(|mut latest| latest.take())
    }
}

unsafe extern "C" fn on_statistics(
    _rk: *mut rd::rd_kafka_t,
    json: *mut c_char,
    len: usize,
    opaque: *mut c_void,
) -> c_int {
    if !opaque.is_null() {
        let callbacks = &*opaque.cast::<Callbacks>();
        let text = String::from_utf8_lossy(std::slice::from_raw_parts(json.cast::<u8>(), len)).into_owned();
        if let Ok(mut latest) = callbacks.statistics.lock() {
            *latest = Some(text);
        }
    }
    0 // librdkafka frees the JSON
}

unsafe extern "C" fn on_log(rk: *const rd::rd_kafka_t, level: c_int, facility: *const c_char, line: *const c_char) {
    if rk.is_null() {
        return;
    }
    let opaque = rd::rd_kafka_opaque(rk);
    if opaque.is_null() {
        return;
    }
    let callbacks = &*opaque.cast::<Callbacks>();
    if let Ok(mut logs) = callbacks.logs.lock() {
        if logs.len() < MAX_KEPT_LOG_LINES {
            logs.push((level, c_text(facility), c_text(rd::rd_kafka_name(rk)), c_text(line)));
        }
    }
}

unsafe extern "C" fn on_delivery(
    _rk: *mut rd::rd_kafka_t,
    message: *const rd::rd_kafka_message_t,
    opaque: *mut c_void,
) {
    if !opaque.is_null() {
        let callbacks = &*opaque.cast::<Callbacks>();
        if let Ok(mut deliveries) = callbacks.deliveries.lock() {
            deliveries.add(message);
        }
    }
}

/// A message librdkafka delivered, owned: destroyed when dropped, so that no path (an early return, an error, a
/// panic while reading it) leaks it.
pub struct Message(NonNull<rd::rd_kafka_message_t>);

// SAFETY: librdkafka's messages may be read and destroyed from any thread.
unsafe impl Send for Message {}

impl Message {
    pub fn as_ptr(&self) -> *mut rd::rd_kafka_message_t {
        self.0.as_ptr()
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        // SAFETY: owned since `consume_batch` took it from librdkafka, destroyed only here.
        unsafe { rd::rd_kafka_message_destroy(self.0.as_ptr()) };
    }
}

/// A librdkafka topic-partition list, owned: destroyed when dropped.
pub struct PartitionList(NonNull<rd::rd_kafka_topic_partition_list_t>);

impl PartitionList {
    /// A list of the one partition `topic`/`partition`, at `offset`.
    pub fn one(topic: &CStr, partition: i32, offset: i64) -> Self {
        // SAFETY: librdkafka allocates the list (it aborts when out of memory, never returns NULL) and returns
        // the element it added to it; `topic` is copied.
        unsafe {
            let list = rd::rd_kafka_topic_partition_list_new(1);
            let element = rd::rd_kafka_topic_partition_list_add(list, topic.as_ptr(), partition);
            (*element).offset = offset;
            Self(NonNull::new(list).expect("rd_kafka_topic_partition_list_new returned NULL"))
        }
    }

    pub fn as_ptr(&self) -> *mut rd::rd_kafka_topic_partition_list_t {
        self.0.as_ptr()
    }

    /// The offset of the list's first element.
    pub fn first_offset(&self) -> i64 {
        // SAFETY: made by `one`, so it holds one element.
        unsafe { (*(*self.0.as_ptr()).elems).offset }
    }
}

impl Drop for PartitionList {
    fn drop(&mut self) {
        // SAFETY: owned since `one` made it, destroyed only here.
        unsafe { rd::rd_kafka_topic_partition_list_destroy(self.0.as_ptr()) };
    }
}

/// Up to `max` messages (or events) of `queue`, waiting up to `timeout_ms` for the first; None when librdkafka
/// refuses to consume.
///
/// # Safety
/// `queue` is a live queue of a live handle.
pub unsafe fn consume_batch(queue: *mut rd::rd_kafka_queue_t, timeout_ms: c_int, max: usize) -> Option<Vec<Message>> {
    let mut raw: Vec<*mut rd::rd_kafka_message_t> = vec![ptr::null_mut(); max];
    let count = rd::rd_kafka_consume_batch_queue(queue, timeout_ms, raw.as_mut_ptr(), max);
    if count < 0 {
        return None;
    }
    Some(raw[..count as usize].iter().filter_map(|&message| NonNull::new(message).map(Message)).collect())
}

/// Raw pointers moved into a section that runs without the GIL; only the owning object's thread uses them.
pub struct Unshared<T>(pub T);
unsafe impl<T> Send for Unshared<T> {}

/// A new librdkafka handle of `kind` with `config` and the callbacks above (delivery reports for a
/// producer); the caller frees the callbacks after `rd_kafka_destroy`.
pub fn open_handle(
    kind: rd::rd_kafka_type_t,
    config: &[(String, String)],
) -> PyResult<(*mut rd::rd_kafka_t, *mut Callbacks)> {
    let mut errstr = vec![0 as c_char; ERRSTR_SIZE];
    unsafe {
        let conf = rd::rd_kafka_conf_new();
        for (name, value) in config {
            let (c_name, c_value) = (c_string(name)?, c_string(value)?);
            let result =
                rd::rd_kafka_conf_set(conf, c_name.as_ptr(), c_value.as_ptr(), errstr.as_mut_ptr(), ERRSTR_SIZE);
            if result != rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
                rd::rd_kafka_conf_destroy(conf);
                // librdkafka's message can quote the value; name only the setting.
                return Err(PyValueError::new_err(format!("librdkafka rejected the setting {name}")));
            }
        }
        let callbacks = Box::into_raw(Box::<Callbacks>::default());
        rd::rd_kafka_conf_set_opaque(conf, callbacks.cast());
        rd::rd_kafka_conf_set_stats_cb(conf, Some(on_statistics));
        rd::rd_kafka_conf_set_log_cb(conf, Some(on_log));
        if kind == rd::rd_kafka_type_t::RD_KAFKA_PRODUCER {
            rd::rd_kafka_conf_set_dr_msg_cb(conf, Some(on_delivery));
        }
        let rk = rd::rd_kafka_new(kind, conf, errstr.as_mut_ptr(), ERRSTR_SIZE);
        if rk.is_null() {
            // rd_kafka_new takes conf only on success.
            rd::rd_kafka_conf_destroy(conf);
            drop(Box::from_raw(callbacks));
            return Err(PyValueError::new_err(format!(
                "librdkafka could not start a client: {}",
                c_text(errstr.as_ptr())
            )));
        }
        Ok((rk, callbacks))
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;

    use super::*;

    #[test]
    fn an_error_code_has_librdkafkas_name_and_description() {
        assert_eq!(error_name(-192), ("_MSG_TIMED_OUT".to_string(), "Local: Message timed out".to_string()));
        assert_eq!(error_name(10).0, "MSG_SIZE_TOO_LARGE");
    }

    #[test]
    fn a_partition_list_holds_its_one_partition_at_its_offset() {
        let topic = CString::new("orders").unwrap();
        let list = PartitionList::one(&topic, 7, 42);
        assert_eq!(list.first_offset(), 42);
        // SAFETY: `one` made a list of one element.
        let (count, element) = unsafe { ((*list.as_ptr()).cnt, &*(*list.as_ptr()).elems) };
        assert_eq!((count, element.partition), (1, 7));
        // SAFETY: librdkafka copied the topic into the element.
        assert_eq!(unsafe { CStr::from_ptr(element.topic) }, topic.as_c_str());
    }
}
