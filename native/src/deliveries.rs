//! A producer's delivery reports, tallied in librdkafka's callback so that no Python object is made per
//! record: delivered records per (topic, partition), failures per (topic, partition, error code), and
//! the first delivered record (the participant's probe).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::c_int;
use std::ptr;

use rdkafka_sys as rd;

use crate::c_strings::c_text;

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
                (!data.is_null()).then(|| {
                    if len == 0 {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(data.cast::<u8>(), len).to_vec()
                    }
                })
            };
            let name = self.names.get(&topic).cloned().unwrap_or_default();
            self.first = Some((
                name,
                partition,
                (*message).offset,
                owned((*message).key, (*message).key_len),
                owned((*message).payload, (*message).len),
            ));
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
        self.delivered
            .iter()
            .map(|(&(topic, partition), &count)| (self.name(topic).unwrap_or_default(), partition, count))
            .collect()
    }

    pub fn failures(&self) -> Vec<Failure> {
        self.failures
            .iter()
            .map(|(&(topic, partition, err), &count)| (self.name(topic), partition, err, count))
            .collect()
    }

    pub fn first(&self) -> Option<FirstRecord> {
        self.first.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delivery report of no topic handle (librdkafka names none for a record it never sent).
    fn report(err: c_int, partition: i32, offset: i64, value: &'static [u8]) -> rd::rd_kafka_message_t {
        // SAFETY: a zeroed message is a valid value of the plain C struct (null pointers, no error).
        let mut message: rd::rd_kafka_message_t = unsafe { std::mem::zeroed() };
        // SAFETY: `err` is a C int in the struct's layout; written through the pointer like `add` reads it.
        unsafe { ptr::addr_of_mut!(message.err).cast::<c_int>().write(err) };
        message.partition = partition;
        message.offset = offset;
        message.payload = value.as_ptr() as *mut std::ffi::c_void;
        message.len = value.len();
        message
    }

    #[test]
    fn reports_are_tallied_per_partition_and_error_and_the_first_delivered_one_kept() {
        let mut deliveries = Deliveries::default();
        for message in
            [report(0, 0, 10, b"a"), report(-192, 1, -1, b"b"), report(0, 0, 11, b"c"), report(-192, 1, -1, b"d")]
        {
            // SAFETY: a live report, as librdkafka serves one.
            unsafe { deliveries.add(&message) };
        }
        assert!(deliveries.failed());
        assert_eq!(deliveries.delivered(), [(String::new(), 0, 2)]);
        assert_eq!(deliveries.failures(), [(None, 1, -192, 2)]);
        assert_eq!(deliveries.first(), Some((String::new(), 0, 10, None, Some(b"a".to_vec()))));
    }

    #[test]
    fn no_reports_is_no_failure() {
        let deliveries = Deliveries::default();
        assert!(!deliveries.failed() && deliveries.delivered().is_empty() && deliveries.first().is_none());
    }
}
