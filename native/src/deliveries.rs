//! A producer's delivery reports, tallied in librdkafka's callback so that no Python object is made per
//! record: delivered records per (topic, partition), failures per (topic, partition, error code), and
//! the first delivered record (the participant's probe).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::c_int;
use std::ptr;

use rdkafka_sys as rd;

use crate::handle::c_text;

/// Where the first delivered record landed, and its key and value.
pub type FirstRecord = (String, i32, i64, Option<Vec<u8>>, Option<Vec<u8>>);
/// (topic, partition, error code, records); the topic is None when librdkafka did not name one.
pub type Failure = (Option<String>, i32, i32, i64);

#[derive(Default)]
pub struct Deliveries {
    /// Topic names by topic handle: a report names its topic by handle.
    names: HashMap<usize, String>,
    delivered: HashMap<(usize, i32), i64>,
    failures: HashMap<(usize, i32, c_int), i64>,
    first: Option<FirstRecord>,
}

impl Deliveries {
    /// # Safety
    /// `message` is a delivery report librdkafka is serving.
    pub unsafe fn add(&mut self, message: *const rd::rd_kafka_message_t) {
        // Read through the pointer: `err` is typed as an enum that does not declare every code.
        let err = ptr::addr_of!((*message).err).cast::<c_int>().read();
        let (rkt, partition) = ((*message).rkt, (*message).partition);
        let topic = rkt as usize;
        if let Entry::Vacant(name) = self.names.entry(topic) {
            if !rkt.is_null() {
                name.insert(c_text(rd::rd_kafka_topic_name(rkt)));
            }
        }
        if err != 0 {
            *self.failures.entry((topic, partition, err)).or_insert(0) += 1;
            return;
        }
        *self.delivered.entry((topic, partition)).or_insert(0) += 1;
        if self.first.is_none() {
            let owned = |data: *const std::ffi::c_void, len: usize| {
                (!data.is_null()).then(|| if len == 0 { Vec::new() } else { std::slice::from_raw_parts(data.cast::<u8>(), len).to_vec() })
            };
            let name = self.names.get(&topic).cloned().unwrap_or_default();
            self.first = Some((name, partition, (*message).offset, owned((*message).key, (*message).key_len), owned((*message).payload, (*message).len)));
        }
    }

    pub fn failed(&self) -> bool {
        !self.failures.is_empty()
    }

    fn name(&self, topic: usize) -> Option<String> {
        self.names.get(&topic).cloned()
    }

    /// (topic, partition, records delivered) per partition.
    pub fn delivered(&self) -> Vec<(String, i32, i64)> {
        self.delivered.iter().map(|(&(topic, partition), &count)| (self.name(topic).unwrap_or_default(), partition, count)).collect()
    }

    pub fn failures(&self) -> Vec<Failure> {
        self.failures.iter().map(|(&(topic, partition, err), &count)| (self.name(topic), partition, err, count)).collect()
    }

    pub fn first(&self) -> Option<FirstRecord> {
        self.first.clone()
    }
}
