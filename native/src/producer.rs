//! A task's transactional producer that produces straight from Arrow columns.
//!
//! It makes the same librdkafka calls as confluent-kafka's `Producer` (init_transactions,
//! begin_transaction, produce, flush, abort_transaction), with the same settings, so a write behaves the
//! same on both paths; only the per-record work (reading the columns, producing, tallying delivery
//! reports) leaves Python. The Python task producer (`write/task_producer.py`) keeps every rule of the
//! write. `close` destroys the handle without aborting: the transaction stays open for the driver.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rdkafka_sys as rd;

use crate::arrow_input::{Columns, Exported, Headers};
use crate::c_strings::{c_string, c_text};
use crate::deliveries::Failure;
use crate::handle::{open_handle, Callbacks, LogLine, Unshared};

// Error codes taken as plain integers (see `handle`).
#[allow(clashing_extern_declarations)]
extern "C" {
    #[link_name = "rd_kafka_error_code"]
    fn txn_error_code(error: *const rd::rd_kafka_error_t) -> c_int;
    #[link_name = "rd_kafka_metadata"]
    fn topic_metadata(
        rk: *mut rd::rd_kafka_t,
        all_topics: c_int,
        only_rkt: *mut rd::rd_kafka_topic_t,
        metadata: *mut *const rd::rd_kafka_metadata,
        timeout_ms: c_int,
    ) -> c_int;
}

const QUEUE_FULL: c_int = rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__QUEUE_FULL as c_int;
const QUEUE_POLL_MS: c_int = 50;
const UNASSIGNED: i32 = -1;

/// A failed transactional call: (code, reason, fatal, retriable, requires abort), as confluent-kafka's
/// `KafkaError` carries them.
type TxnError = (i32, String, bool, bool, bool);
/// A record librdkafka refused at produce time: (row, code, topic, partition).
type Refused = (usize, i32, String, i32);
type FirstRecord<'py> = (String, i32, i64, Option<Bound<'py, PyBytes>>, Option<Bound<'py, PyBytes>>);

unsafe fn txn_outcome(error: *mut rd::rd_kafka_error_t) -> Option<TxnError> {
    if error.is_null() {
        return None;
    }
    let outcome = (
        txn_error_code(error),
        c_text(rd::rd_kafka_error_string(error)),
        rd::rd_kafka_error_is_fatal(error) != 0,
        rd::rd_kafka_error_is_retriable(error) != 0,
        rd::rd_kafka_error_txn_requires_abort(error) != 0,
    );
    rd::rd_kafka_error_destroy(error);
    Some(outcome)
}

#[pyclass]
pub struct TaskProducer {
    rk: *mut rd::rd_kafka_t,
    callbacks: *mut Callbacks,
    topics: HashMap<Vec<u8>, *mut rd::rd_kafka_topic_t>,
}

// SAFETY: the handle and topic handles are librdkafka's, which may be used from any thread. The callbacks
// (delivery reports) run inside poll/flush, in the calling thread. The task producer is made and warmed up on a
// thread while its task waits for rows, then used by the task's thread: one thread at a time, never two at once
// (the Python side hands it over only after the first thread ended). PyO3 also requires Sync of a class that
// may move between threads; no two threads ever call it at once (the extension module is private to the package).
unsafe impl Send for TaskProducer {}
unsafe impl Sync for TaskProducer {}

#[pymethods]
impl TaskProducer {
    /// A producer of `config`, which names its `transactional.id`.
    #[new]
    fn new(config: Vec<(String, String)>) -> PyResult<Self> {
        let (rk, callbacks) = open_handle(rd::rd_kafka_type_t::RD_KAFKA_PRODUCER, &config)?;
        Ok(TaskProducer { rk, callbacks, topics: HashMap::new() })
    }

    /// A metadata request for `topic`; librdkafka's error code (0: none).
    fn warm_up(&mut self, py: Python<'_>, topic: &str, timeout_ms: i32) -> PyResult<i32> {
        let rkt = Unshared(self.topic(topic.as_bytes())?);
        let rk = Unshared(self.live()?);
        Ok(py.allow_threads(move || {
            let (rk, rkt) = (rk, rkt);
            let mut metadata = ptr::null();
            let err = unsafe { topic_metadata(rk.0, 0, rkt.0, &mut metadata, timeout_ms) };
            if !metadata.is_null() {
                unsafe { rd::rd_kafka_metadata_destroy(metadata) };
            }
            err
        }))
    }

    fn init_transactions(&self, py: Python<'_>, timeout_ms: i32) -> PyResult<Option<TxnError>> {
        let rk = Unshared(self.live()?);
        Ok(py.allow_threads(move || {
            let rk = rk;
            unsafe { txn_outcome(rd::rd_kafka_init_transactions(rk.0, timeout_ms)) }
        }))
    }

    fn begin_transaction(&self) -> PyResult<Option<TxnError>> {
        Ok(unsafe { txn_outcome(rd::rd_kafka_begin_transaction(self.live()?)) })
    }

    fn abort_transaction(&self, py: Python<'_>, timeout_ms: i32) -> PyResult<Option<TxnError>> {
        let rk = Unshared(self.live()?);
        Ok(py.allow_threads(move || {
            let rk = rk;
            unsafe { txn_outcome(rd::rd_kafka_abort_transaction(rk.0, timeout_ms)) }
        }))
    }

    /// Produce the rows of the columns, each given by Arrow's C data interface (`__arrow_c_array__`) and
    /// validated before the first record is produced: the topic is `topic`, else the `topics` column's; a null
    /// partition (or none) lets the partitioner choose. A full queue is waited for up to `queue_timeout_ms`
    /// at a time. Returns the first record librdkafka refused, where producing stopped. The rows are produced
    /// without the GIL.
    #[pyo3(signature = (topic, topics, values, keys, partitions, headers, queue_timeout_ms))]
    #[allow(clippy::too_many_arguments)]
    fn produce(
        &mut self,
        py: Python<'_>,
        topic: Option<&str>,
        topics: Option<Exported<'_>>,
        values: Exported<'_>,
        keys: Option<Exported<'_>>,
        partitions: Option<Exported<'_>>,
        headers: Option<Exported<'_>>,
        queue_timeout_ms: u64,
    ) -> PyResult<Option<Refused>> {
        self.live()?;
        let fixed_topic = match topic {
            Some(name) => Some(Unshared(self.topic(name.as_bytes())?)),
            None => None,
        };
        // Every column is imported and validated here, with the GIL, before the first record is produced; the
        // columns own what they imported.
        let columns = Columns::take(topics, values, keys, partitions, headers)?;
        let rows = columns.values.len();
        let queue_timeout = Duration::from_millis(queue_timeout_ms);
        py.allow_threads(|| self.produce_rows(fixed_topic, topic, &columns, rows, queue_timeout))
    }

    /// Serve delivery reports and statistics, waiting up to `timeout_ms` for the first.
    fn poll(&self, py: Python<'_>, timeout_ms: i32) -> PyResult<i32> {
        let rk = Unshared(self.live()?);
        Ok(py.allow_threads(move || {
            let rk = rk;
            unsafe { rd::rd_kafka_poll(rk.0, timeout_ms) }
        }))
    }

    /// Wait up to `timeout_ms` for every delivery report; the records still unacknowledged.
    fn flush(&self, py: Python<'_>, timeout_ms: i32) -> PyResult<i32> {
        let rk = Unshared(self.live()?);
        Ok(py.allow_threads(move || {
            let rk = rk;
            unsafe {
                rd::rd_kafka_flush(rk.0, timeout_ms);
                rd::rd_kafka_outq_len(rk.0)
            }
        }))
    }

    /// Whether a delivery report carried an error.
    fn failed(&self) -> PyResult<bool> {
        Ok(self.callbacks()?.deliveries.lock().map(|d| d.failed()).unwrap_or(true))
    }

    /// (topic, partition, records) delivered per partition.
    fn delivered(&self) -> PyResult<Vec<(String, i32, i64)>> {
        Ok(self.callbacks()?.deliveries.lock().map(|d| d.delivered()).unwrap_or_default())
    }

    /// (topic, partition, error code, records) per failure.
    fn failures(&self) -> PyResult<Vec<Failure>> {
        Ok(self.callbacks()?.deliveries.lock().map(|d| d.failures()).unwrap_or_default())
    }

    /// The first delivered record: (topic, partition, offset, key, value).
    fn first<'py>(&self, py: Python<'py>) -> PyResult<Option<FirstRecord<'py>>> {
        let first = self.callbacks()?.deliveries.lock().ok().and_then(|d| d.first());
        Ok(first.map(|(topic, partition, offset, key, value)| {
            (topic, partition, offset, key.map(|k| PyBytes::new(py, &k)), value.map(|v| PyBytes::new(py, &v)))
        }))
    }

    /// The statistics JSON delivered since the last call, if any.
    fn take_statistics(&self) -> PyResult<Option<String>> {
        Ok(self.callbacks()?.take_statistics())
    }

    /// librdkafka's log lines since the last call: (syslog level, facility, client name, line).
    fn take_logs(&self) -> PyResult<Vec<LogLine>> {
        Ok(self.callbacks()?.take_logs())
    }

    /// Free the producer without aborting its transaction; later calls raise. Returns the last log lines.
    fn close(&mut self, py: Python<'_>) -> Vec<LogLine> {
        if self.rk.is_null() {
            return Vec::new();
        }
        let rk = Unshared(std::mem::replace(&mut self.rk, ptr::null_mut()));
        let topics = Unshared(std::mem::take(&mut self.topics));
        py.allow_threads(move || {
            let (rk, topics) = (rk, topics);
            unsafe {
                for rkt in topics.0.into_values() {
                    rd::rd_kafka_topic_destroy(rkt);
                }
                rd::rd_kafka_destroy(rk.0);
            }
        });
        // SAFETY: the callbacks are still allocated (freed only in drop).
        unsafe { (*self.callbacks).take_logs() }
    }
}

impl TaskProducer {
    fn live(&self) -> PyResult<*mut rd::rd_kafka_t> {
        if self.rk.is_null() {
            Err(PyRuntimeError::new_err("the task producer is closed"))
        } else {
            Ok(self.rk)
        }
    }

    fn callbacks(&self) -> PyResult<&Callbacks> {
        self.live()?;
        // SAFETY: freed only in drop.
        Ok(unsafe { &*self.callbacks })
    }

    /// The loop of `produce`, run without the GIL.
    fn produce_rows(
        &mut self,
        fixed_topic: Option<Unshared<*mut rd::rd_kafka_topic_t>>,
        topic: Option<&str>,
        columns: &Columns,
        rows: usize,
        queue_timeout: Duration,
    ) -> PyResult<Option<Refused>> {
        let rk = self.live()?;
        for row in 0..rows {
            let (rkt, name) = match (&fixed_topic, &columns.topics) {
                (Some(rkt), _) => (rkt.0, None),
                (None, Some(column)) => {
                    let name = column.get(row).unwrap_or_default();
                    (self.topic(name)?, Some(name))
                }
                (None, None) => return Err(PyRuntimeError::new_err("produce needs a topic or a topics column")),
            };
            let partition = columns.partitions.as_ref().and_then(|column| column.get(row)).unwrap_or(UNASSIGNED);
            let value = columns.values.get(row);
            let key = columns.keys.as_ref().and_then(|column| column.get(row));
            let mut deadline = None; // read the clock only when the queue is full
            loop {
                let err = unsafe { produce_one(rk, rkt, partition, key, value, columns.headers.as_ref(), row) };
                if err == QUEUE_FULL && Instant::now() < *deadline.get_or_insert_with(|| Instant::now() + queue_timeout)
                {
                    unsafe { rd::rd_kafka_poll(rk, QUEUE_POLL_MS) };
                    continue;
                }
                if err != 0 {
                    let topic = match name {
                        Some(name) => String::from_utf8_lossy(name).into_owned(),
                        None => topic.unwrap_or_default().to_owned(),
                    };
                    return Ok(Some((row, err, topic, partition)));
                }
                break;
            }
        }
        Ok(None)
    }

    /// The producer's handle of topic `name`, made on first use.
    fn topic(&mut self, name: &[u8]) -> PyResult<*mut rd::rd_kafka_topic_t> {
        if let Some(&rkt) = self.topics.get(name) {
            return Ok(rkt);
        }
        let rk = self.live()?;
        let c_name = c_string(&String::from_utf8_lossy(name))?;
        let rkt = unsafe { rd::rd_kafka_topic_new(rk, c_name.as_ptr(), ptr::null_mut()) };
        if rkt.is_null() {
            return Err(PyRuntimeError::new_err(format!(
                "librdkafka could not make a handle of topic {}",
                String::from_utf8_lossy(name)
            )));
        }
        self.topics.insert(name.to_vec(), rkt);
        Ok(rkt)
    }
}

impl Drop for TaskProducer {
    fn drop(&mut self) {
        Python::with_gil(|py| {
            self.close(py);
        });
        // SAFETY: allocated by Box::into_raw in open_handle; librdkafka's threads are gone.
        unsafe { drop(Box::from_raw(self.callbacks)) };
    }
}

/// Produce one record (copied by librdkafka); its error code (0: queued).
///
/// # Safety
/// `rk` and `rkt` are live; the slices and `headers`' buffers are alive; `row` is within them.
unsafe fn produce_one(
    rk: *mut rd::rd_kafka_t,
    rkt: *mut rd::rd_kafka_topic_t,
    partition: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: Option<&Headers>,
    row: usize,
) -> c_int {
    let mut fields: [rd::rd_kafka_vu_t; 6] = std::mem::zeroed();
    fields[0].vtype = rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_RKT;
    fields[0].u.rkt = rkt;
    fields[1].vtype = rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION;
    fields[1].u.i32_ = partition;
    fields[2].vtype = rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS;
    fields[2].u.i = rd::RD_KAFKA_MSG_F_COPY as c_int;
    fields[3].vtype = rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE;
    fields[3].u.mem = memory(value);
    fields[4].vtype = rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_KEY;
    fields[4].u.mem = memory(key);
    let mut count = 5;
    let mut record_headers = ptr::null_mut();
    if let Some(headers) = headers {
        let entries = headers.entries(row);
        if !entries.is_empty() {
            record_headers = rd::rd_kafka_headers_new(entries.len());
            for entry in entries {
                let name = headers.keys.get(entry).unwrap_or_default();
                let header_value = headers.values.get(entry);
                rd::rd_kafka_header_add(
                    record_headers,
                    name.as_ptr().cast(),
                    name.len() as isize,
                    header_value.map_or(ptr::null(), |v| v.as_ptr().cast()),
                    header_value.map_or(0, |v| v.len() as isize),
                );
            }
            fields[5].vtype = rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_HEADERS;
            fields[5].u.headers = record_headers;
            count = 6;
        }
    }
    let error = rd::rd_kafka_produceva(rk, fields.as_ptr(), count);
    if error.is_null() {
        return 0; // librdkafka owns the headers now
    }
    if !record_headers.is_null() {
        rd::rd_kafka_headers_destroy(record_headers);
    }
    let code = txn_error_code(error);
    rd::rd_kafka_error_destroy(error);
    code
}

fn memory(data: Option<&[u8]>) -> rd::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 {
    match data {
        // A null key or value is a NULL pointer; an empty one points at a (static, empty) slice.
        None => rd::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 { ptr: ptr::null_mut(), size: 0 },
        Some(bytes) => {
            rd::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 { ptr: bytes.as_ptr() as *mut c_void, size: bytes.len() }
        }
    }
}
