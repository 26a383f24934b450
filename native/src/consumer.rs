//! A librdkafka consumer of one assigned partition, filling Arrow buffers with what it delivers.
//!
//! It uses librdkafka the way confluent-kafka's `Consumer.consume()` does (the consumer queue, the
//! main queue forwarded to it, callbacks served while consuming), so a read behaves the same on
//! both paths. Errors come back as librdkafka's codes, which are confluent-kafka's `KafkaError` codes.

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

use arrow_array::StructArray;
use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use rdkafka_sys as rd;

use crate::arrow_buffers::{BatchBuilder, ExportedBatch, Header};
use crate::c_strings::{c_string, c_text};
use crate::handle::{consume_batch, error_text, open_handle, Callbacks, LogLine, Message, PartitionList, Unshared};

// librdkafka functions whose error code is taken as a plain integer (see `handle`).
#[allow(clashing_extern_declarations)]
extern "C" {
    #[link_name = "rd_kafka_assign"]
    fn assign_partitions(rk: *mut rd::rd_kafka_t, partitions: *const rd::rd_kafka_topic_partition_list_t) -> c_int;
    #[link_name = "rd_kafka_position"]
    fn consume_position(rk: *mut rd::rd_kafka_t, partitions: *mut rd::rd_kafka_topic_partition_list_t) -> c_int;
    #[link_name = "rd_kafka_query_watermark_offsets"]
    fn query_watermarks(
        rk: *mut rd::rd_kafka_t,
        topic: *const c_char,
        partition: i32,
        low: *mut i64,
        high: *mut i64,
        timeout_ms: c_int,
    ) -> c_int;
}

const NO_ERROR: c_int = 0;
const MAX_BATCH_BYTES: usize = i32::MAX as usize;
const FATAL_ERROR: c_int = rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__FATAL as c_int;

pub fn librdkafka_version() -> String {
    unsafe { c_text(rd::rd_kafka_version_str()) }
}

/// The librdkafka handle, its consumer queue and the callbacks' state (freed after the handle, whose
/// threads use it until `rd_kafka_destroy` has joined them).
struct Client {
    rk: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    callbacks: *mut Callbacks,
    /// An application handle for each topic this client has read, held until it shuts down (see `know_topic`).
    topics: HashMap<CString, *mut rd::rd_kafka_topic_t>,
}

impl Client {
    fn open(config: &[(String, String)]) -> PyResult<Client> {
        let (rk, callbacks) = open_handle(rd::rd_kafka_type_t::RD_KAFKA_CONSUMER, config)?;
        unsafe {
            rd::rd_kafka_poll_set_consumer(rk);
            let queue = rd::rd_kafka_queue_get_consumer(rk);
            // Without a group.id librdkafka has no consumer queue (NULL): refuse it rather than crash later.
            if queue.is_null() {
                drop(Client { rk, queue, callbacks, topics: HashMap::new() });
                return Err(PyValueError::new_err(
                    "a range consumer needs a group.id (librdkafka has no consumer queue without one)",
                ));
            }
            Ok(Client { rk, queue, callbacks, topics: HashMap::new() })
        }
    }

    /// Make sure librdkafka looks up `topic`'s leaders now. A partition assigned in a topic the client has no
    /// metadata for waits for librdkafka's once-a-second topic scan before its first fetch (a fresh consumer's
    /// first record came 0.7-1.0 s after `assign`); creating the topic's application handle starts a leader
    /// query at once. The handle is kept: dropping it could let librdkafka forget the topic before the query.
    fn know_topic(&mut self, topic: &CStr) {
        if self.topics.contains_key(topic) {
            return;
        }
        // SAFETY: a live handle; a NULL configuration takes the handle's defaults.
        let handle = unsafe { rd::rd_kafka_topic_new(self.rk, topic.as_ptr(), ptr::null_mut()) };
        if !handle.is_null() {
            self.topics.insert(topic.to_owned(), handle);
        }
    }

    fn shut_down(&mut self) {
        if self.rk.is_null() {
            return;
        }
        unsafe {
            rd::rd_kafka_consumer_close(self.rk);
            for (_, handle) in self.topics.drain() {
                rd::rd_kafka_topic_destroy(handle);
            }
            if !self.queue.is_null() {
                rd::rd_kafka_queue_destroy(self.queue);
            }
            rd::rd_kafka_destroy(self.rk);
        }
        self.rk = ptr::null_mut();
    }

    fn callbacks(&self) -> &Callbacks {
        // SAFETY: freed only in drop.
        unsafe { &*self.callbacks }
    }

    fn take_logs(&self) -> Vec<LogLine> {
        self.callbacks().take_logs()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shut_down();
        // SAFETY: allocated by Box::into_raw in open; librdkafka's threads are gone.
        unsafe { drop(Box::from_raw(self.callbacks)) };
    }
}

/// One step's outcome: the offset of the last record taken, whether a record at or past `end` was
/// delivered, and the first error event (code, reason, offset, fatal), at which the step stopped.
type Step = (Option<i64>, bool, Option<(i32, String, i64, bool)>);

#[pyclass]
pub struct RangeConsumer {
    client: Option<Client>,
    topic: CString,
    partition: i32,
    timestamp_types: (i32, i32, i32),
    max_records: usize,
    max_bytes: usize,
    include_headers: bool,
    current: BatchBuilder,
    sealed: Vec<StructArray>,
    /// Delivered by librdkafka but not yet looked at: a step stops at an error event.
    pending: VecDeque<Message>,
}

// SAFETY: librdkafka's handle, queue and messages may be used from any thread, and its callbacks (statistics,
// logs) run inside consume calls and store into `Callbacks` behind mutexes. A consumer kept between range reads
// (the package's read/idle_consumers.py) is taken by one reader at a time, which may run on another thread than
// the one that made it; PyO3's borrow checks refuse two threads calling it at once (the extension module is
// private to the package).
unsafe impl Send for RangeConsumer {}
unsafe impl Sync for RangeConsumer {}

#[pymethods]
impl RangeConsumer {
    /// `timestamp_types`: Spark's codes for (CreateTime, LogAppendTime, no timestamp).
    #[new]
    fn new(
        config: Vec<(String, String)>,
        topic: &str,
        partition: i32,
        include_headers: bool,
        max_records: usize,
        max_bytes: usize,
        timestamp_types: (i32, i32, i32),
    ) -> PyResult<Self> {
        Ok(RangeConsumer {
            client: Some(Client::open(&config)?),
            topic: c_string(topic)?,
            partition,
            timestamp_types,
            max_records: max_records.max(1),
            max_bytes,
            include_headers,
            current: BatchBuilder::new(include_headers),
            sealed: Vec::new(),
            pending: VecDeque::new(),
        })
    }

    /// Start fetching at `offset`; librdkafka's error code (0: none).
    fn assign(&mut self, offset: i64) -> PyResult<i32> {
        let topic = self.topic.clone();
        let client = self.client.as_mut().ok_or_else(closed)?;
        client.know_topic(&topic);
        let partitions = PartitionList::one(&self.topic, self.partition, offset);
        // SAFETY: a live handle and a live list.
        Ok(unsafe { assign_partitions(client.rk, partitions.as_ptr()) })
    }

    /// Take up to `max_records` delivered records (waiting at most `timeout_ms` for the first)
    /// into the batches, stopping at the first error event or at a record at or past `end`.
    fn step(&mut self, py: Python<'_>, max_records: usize, timeout_ms: i32, end: i64) -> PyResult<Step> {
        if self.pending.is_empty() {
            self.fetch(py, max_records.max(1), timeout_ms)?;
        }
        let mut last = None;
        while let Some(message) = self.pending.pop_front() {
            let outcome = unsafe { self.take(message.as_ptr(), end) };
            drop(message);
            match outcome {
                Taken::Record(offset) => last = Some(offset),
                Taken::PastEnd => {
                    self.discard_pending();
                    return Ok((last, true, None));
                }
                Taken::Error(error) => return Ok((last, false, Some(error))),
                Taken::TimestampOverflow(offset, timestamp_ms) => {
                    return Err(PyOverflowError::new_err((offset, timestamp_ms)))
                }
                Taken::UnparsableHeaders(offset, reason) => {
                    return Err(PyValueError::new_err(("headers", offset, reason)))
                }
            }
        }
        Ok((last, false, None))
    }

    /// Messages delivered (so past librdkafka's position) that no step has looked at yet.
    fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The full batches, and with `flush` the partial one too, for Arrow's C data interface (see `arrow_buffers`).
    fn take_batches<'py>(&mut self, py: Python<'py>, flush: bool) -> PyResult<Bound<'py, PyList>> {
        if flush && self.current.len() > 0 {
            self.seal();
        }
        let batches = PyList::empty(py);
        for batch in self.sealed.drain(..) {
            batches.append(Bound::new(py, ExportedBatch::new(batch))?)?;
        }
        Ok(batches)
    }

    /// librdkafka's consume position of the partition: (error code, offset).
    fn position(&self) -> PyResult<(i32, i64)> {
        let client = self.client()?;
        let partitions = PartitionList::one(&self.topic, self.partition, rd::RD_KAFKA_OFFSET_INVALID as i64);
        // SAFETY: a live handle and a live list.
        let err = unsafe { consume_position(client.rk, partitions.as_ptr()) };
        Ok((err, partitions.first_offset()))
    }

    /// The partition's watermarks from its leader: (error code, low, high).
    fn watermarks(&self, py: Python<'_>, timeout_ms: i32) -> PyResult<(i32, i64, i64)> {
        let client = self.client()?;
        let (rk, topic, partition) = (Unshared(client.rk), Unshared(self.topic.as_ptr()), self.partition);
        Ok(py.allow_threads(move || {
            let (rk, topic) = (rk, topic);
            let (mut low, mut high) = (0i64, 0i64);
            let err = unsafe { query_watermarks(rk.0, topic.0, partition, &mut low, &mut high, timeout_ms) };
            (err, low, high)
        }))
    }

    /// The statistics JSON delivered since the last call, if any.
    fn take_statistics(&self) -> PyResult<Option<String>> {
        Ok(self.client()?.callbacks().take_statistics())
    }

    /// librdkafka's log lines since the last call: (syslog level, facility, client name, line).
    fn take_logs(&self) -> PyResult<Vec<(i32, String, String, String)>> {
        Ok(self.client()?.take_logs())
    }

    /// Leave the partition and drop whatever it delivered, so that the client can read another range
    /// (`retarget`, then `assign`): librdkafka's error code of the unassignment (0: none).
    fn release(&mut self, py: Python<'_>) -> PyResult<i32> {
        self.discard_pending();
        self.current = BatchBuilder::new(self.include_headers);
        self.sealed.clear();
        let client = self.client()?;
        let (rk, queue) = (Unshared(client.rk), Unshared(client.queue));
        Ok(py.allow_threads(move || {
            let (rk, queue) = (rk, queue);
            unsafe {
                let err = assign_partitions(rk.0, ptr::null());
                // Events of the old assignment already queued (dropped here): librdkafka drops later ones by their version.
                while consume_batch(queue.0, 0, 256).is_some_and(|messages| !messages.is_empty()) {}
                err
            }
        }))
    }

    /// Read `partition` of `topic` from now on (after `release`).
    fn retarget(&mut self, topic: &str, partition: i32) -> PyResult<()> {
        self.topic = c_string(topic)?;
        self.partition = partition;
        Ok(())
    }

    /// Leave the partition and free the client; later calls raise. Returns the last log lines.
    fn close(&mut self, py: Python<'_>) -> Vec<(i32, String, String, String)> {
        self.discard_pending();
        let Some(client) = self.client.take() else { return Vec::new() };
        let client = Unshared(client);
        let client = py.allow_threads(move || {
            let mut client = client;
            client.0.shut_down();
            client
        });
        client.0.take_logs()
    }
}

enum Taken {
    Record(i64),
    PastEnd,
    Error((i32, String, i64, bool)),
    /// A record timestamp (ms) that Spark's microseconds cannot hold: (offset, timestamp).
    TimestampOverflow(i64, i64),
    /// A record whose headers librdkafka cannot parse: (offset, librdkafka's reason).
    UnparsableHeaders(i64, String),
}

impl RangeConsumer {
    fn client(&self) -> PyResult<&Client> {
        self.client.as_ref().ok_or_else(closed)
    }

    fn fetch(&mut self, py: Python<'_>, max_records: usize, timeout_ms: i32) -> PyResult<()> {
        let queue = Unshared(self.client()?.queue);
        let delivered = py.allow_threads(move || {
            let queue = queue;
            unsafe { consume_batch(queue.0, timeout_ms, max_records) }
        });
        let Some(delivered) = delivered else {
            return Err(PyRuntimeError::new_err("librdkafka could not consume from the partition's queue"));
        };
        self.pending.extend(delivered);
        Ok(())
    }

    /// SAFETY: `message` is a live message of this consumer's handle.
    unsafe fn take(&mut self, message: *mut rd::rd_kafka_message_t, end: i64) -> Taken {
        // Fields are read through the pointer, never as a reference to the whole struct: its `err`
        // is typed as an enum that does not declare every code librdkafka may put there.
        let err = ptr::addr_of!((*message).err).cast::<c_int>().read();
        let (payload, len, offset) = ((*message).payload, (*message).len, (*message).offset);
        if err != NO_ERROR {
            let reason = if payload.is_null() {
                c_text(error_text(err))
            } else {
                String::from_utf8_lossy(bytes(payload, len)).into_owned()
            };
            return Taken::Error((err, reason, offset, err == FATAL_ERROR));
        }
        if offset >= end {
            return Taken::PastEnd;
        }
        let mut timestamp_type = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        let timestamp_ms = rd::rd_kafka_message_timestamp(message, &mut timestamp_type);
        let (create_time, log_append_time, no_timestamp) = self.timestamp_types;
        // A v2 batch keeps a producer's "no timestamp" (-1) and the broker labels it CreateTime.
        let spark_type = match timestamp_type {
            _ if timestamp_ms == -1 => no_timestamp,
            rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_CREATE_TIME => create_time,
            rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME => log_append_time,
            _ => no_timestamp,
        };
        let timestamp_us = match (spark_type != no_timestamp).then(|| timestamp_ms.checked_mul(1000)) {
            None => None,
            Some(Some(us)) => Some(us),
            Some(None) => return Taken::TimestampOverflow(offset, timestamp_ms),
        };
        let key_ptr = (*message).key;
        let key = (!key_ptr.is_null()).then(|| bytes(key_ptr, (*message).key_len));
        let value = (!payload.is_null()).then(|| bytes(payload, len));
        let headers = if self.include_headers {
            match record_headers(message) {
                Ok(headers) => headers,
                Err(err) => return Taken::UnparsableHeaders(offset, c_text(error_text(err))),
            }
        } else {
            Vec::new()
        };
        let size = key.map_or(0, <[u8]>::len)
            + value.map_or(0, <[u8]>::len)
            + headers.iter().map(|(name, value)| name.len() + value.map_or(0, <[u8]>::len)).sum::<usize>();
        if self.current.len() > 0 && self.current.bytes + size > MAX_BATCH_BYTES {
            // Arrow's binary columns have 32-bit offsets: a batch never holds more than 2 GiB.
            self.seal();
        }
        self.current.push_record(key, value, offset, timestamp_us, spark_type);
        if self.include_headers {
            self.current.push_headers((!headers.is_empty()).then_some(headers.as_slice()));
        }
        if self.current.len() >= self.max_records || self.current.bytes >= self.max_bytes {
            self.seal();
        }
        Taken::Record(offset)
    }

    fn seal(&mut self) {
        let next = BatchBuilder::sized_like(&self.current);
        let full = std::mem::replace(&mut self.current, next);
        self.sealed.push(full.finish());
    }

    fn discard_pending(&mut self) {
        self.pending.clear();
    }
}

impl Drop for RangeConsumer {
    fn drop(&mut self) {
        self.discard_pending();
        self.client.take();
    }
}

fn closed() -> PyErr {
    PyRuntimeError::new_err("the range consumer is closed")
}

unsafe fn bytes<'a>(data: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(data.cast::<u8>(), len)
    }
}

/// A record's headers as (name, value) pairs, in order; empty when it has none; librdkafka's error code when
/// it cannot parse them (Java's consumer, so Spark's source, fails on such a record: never a silent null).
unsafe fn record_headers<'a>(message: *mut rd::rd_kafka_message_t) -> Result<Vec<Header<'a>>, c_int> {
    let mut headers = ptr::null_mut();
    let mut pairs = Vec::new();
    // Read as a plain integer: the enum does not declare every code librdkafka may return.
    let err = rd::rd_kafka_message_headers(message, &mut headers) as c_int;
    if err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__NOENT as c_int {
        return Ok(pairs);
    }
    if err != NO_ERROR {
        return Err(err);
    }
    let mut index = 0;
    loop {
        let (mut name, mut value, mut size) = (ptr::null(), ptr::null(), 0usize);
        if rd::rd_kafka_header_get_all(headers, index, &mut name, &mut value, &mut size)
            != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        {
            return Ok(pairs);
        }
        let name = CStr::from_ptr(name).to_bytes();
        pairs.push((name, (!value.is_null()).then(|| bytes(value, size))));
        index += 1;
    }
}
