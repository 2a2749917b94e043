//! The histograms in shared memory: a table of `queue.metrics_queues`
//! slots, one per queue of the cluster (keyed by database and queue id),
//! each with a histogram of the wait and one of the run for each outcome.
//! Every field is an atomic, so committing transactions add to them and
//! readers read them without a lock. A queue takes a slot the first time
//! one of its observations commits (open addressing, claimed with a
//! compare-and-swap) and keeps it until the server stops; with every slot
//! taken, a new queue's observations are counted as dropped instead.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use super::buckets;
use crate::gucs;
use crate::worker::segments::Segment;

/// What a histogram measures: the wait, or the run by its outcome.
pub const KINDS: usize = 4;

#[repr(C)]
struct Histogram {
    /// Observations per bucket (not cumulative).
    buckets: [AtomicU64; buckets::COUNT],
    /// Their sum, in microseconds.
    sum_us: AtomicU64,
}

#[repr(C)]
struct QueueSlot {
    /// database oid << 32 | queue id; 0: free.
    key: AtomicU64,
    histograms: [Histogram; KINDS],
}

#[repr(C)]
struct Header {
    slots: u32,
    used: AtomicU32,
    /// Observations of queues that found no slot.
    dropped: AtomicU64,
    /// Spans of the workers' delivery attempts sent to the collector, and
    /// dropped (spans/export.rs).
    spans_exported: AtomicU64,
    spans_dropped: AtomicU64,
}

static HEADER: AtomicPtr<Header> = AtomicPtr::new(std::ptr::null_mut());

/// The histograms' shared memory (worker/segments.rs).
pub static SEGMENT: Segment = Segment {
    name: c"queue metrics",
    bytes,
    attach,
};

fn slot_count() -> usize {
    gucs::METRICS_QUEUES.get().max(1) as usize
}

fn header_bytes() -> usize {
    std::mem::size_of::<Header>().next_multiple_of(64)
}

fn bytes() -> usize {
    header_bytes() + slot_count() * std::mem::size_of::<QueueSlot>()
}

fn attach(memory: *mut u8, found: bool) {
    let header = memory as *mut Header;
    if !found {
        // SAFETY: the memory is bytes() long and aligned for any type;
        // written only when it was just made, before any other process can
        // look at it. Zero is a free slot and an empty histogram.
        unsafe {
            std::ptr::write_bytes(memory, 0, bytes());
            (*header).slots = slot_count() as u32;
        }
    }
    HEADER.store(header, Ordering::Release);
}

fn header() -> Option<&'static Header> {
    let header = HEADER.load(Ordering::Acquire);
    // SAFETY: attach() set it to the header of the segment, which lives as
    // long as the server; `slots` is written before any process starts.
    (!header.is_null()).then(|| unsafe { &*header })
}

fn slots() -> &'static [QueueSlot] {
    let Some(header) = header() else {
        return &[];
    };
    // SAFETY: the slots follow the header (bytes()), all atomics, so that
    // any process may read and write them at any time.
    unsafe {
        let first = (header as *const Header as *const u8).add(header_bytes()) as *const QueueSlot;
        std::slice::from_raw_parts(first, header.slots as usize)
    }
}

/// Whether the histograms exist (the library was preloaded).
pub fn available() -> bool {
    header().is_some()
}

fn key(database: u32, queue: i32) -> u64 {
    (u64::from(database) << 32) | u64::from(queue as u32)
}

/// The slot of `key`, taking a free one for it unless `create` is false.
fn find(key: u64, create: bool) -> Option<&'static QueueSlot> {
    let slots = slots();
    if slots.is_empty() {
        return None;
    }
    // Fibonacci hashing spreads consecutive queue ids.
    let start = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % slots.len();
    for probe in 0..slots.len() {
        let slot = &slots[(start + probe) % slots.len()];
        let held = slot.key.load(Ordering::Acquire);
        if held == key {
            return Some(slot);
        }
        if held != 0 {
            continue;
        }
        if !create {
            return None;
        }
        match slot
            .key
            .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                if let Some(header) = header() {
                    header.used.fetch_add(1, Ordering::Relaxed);
                }
                return Some(slot);
            }
            // Another process took it, perhaps for the same queue.
            Err(other) if other == key => return Some(slot),
            Err(_) => continue,
        }
    }
    None
}

/// Adds observations `(kind, microseconds)` of queue `queue` of `database`.
pub fn record(database: u32, queue: i32, observations: &[(usize, i64)]) {
    let Some(header) = header() else {
        return;
    };
    let Some(slot) = find(key(database, queue), true) else {
        header
            .dropped
            .fetch_add(observations.len() as u64, Ordering::Relaxed);
        return;
    };
    for &(kind, us) in observations {
        let histogram = &slot.histograms[kind];
        histogram.buckets[buckets::of(us)].fetch_add(1, Ordering::Relaxed);
        histogram
            .sum_us
            .fetch_add(us.max(0) as u64, Ordering::Relaxed);
    }
}

/// One histogram as read: its buckets' counts (not cumulative) and their
/// sum in microseconds.
pub struct Read {
    pub queue: i32,
    pub kind: usize,
    pub buckets: [u64; buckets::COUNT],
    pub sum_us: u64,
}

/// Every histogram of the queues of `database` that have a slot.
pub fn read(database: u32) -> Vec<Read> {
    let mut read = Vec::new();
    for slot in slots() {
        let key = slot.key.load(Ordering::Acquire);
        if key >> 32 != u64::from(database) || key == 0 {
            continue;
        }
        for (kind, histogram) in slot.histograms.iter().enumerate() {
            read.push(Read {
                queue: key as u32 as i32,
                kind,
                buckets: std::array::from_fn(|i| histogram.buckets[i].load(Ordering::Relaxed)),
                sum_us: histogram.sum_us.load(Ordering::Relaxed),
            });
        }
    }
    read
}

/// Spans sent to the collector, and dropped (from any thread: atomics).
pub fn count_spans(exported: u64, dropped: u64) {
    if let Some(header) = header() {
        header.spans_exported.fetch_add(exported, Ordering::Relaxed);
        header.spans_dropped.fetch_add(dropped, Ordering::Relaxed);
    }
}

/// What the table holds: its slots, those taken, observations dropped,
/// spans exported and dropped; zeros without the preload.
pub struct Status {
    pub slots: u32,
    pub used: u32,
    pub dropped: u64,
    pub spans_exported: u64,
    pub spans_dropped: u64,
}

pub fn status() -> Status {
    header().map_or(
        Status {
            slots: 0,
            used: 0,
            dropped: 0,
            spans_exported: 0,
            spans_dropped: 0,
        },
        |h| Status {
            slots: h.slots,
            used: h.used.load(Ordering::Relaxed),
            dropped: h.dropped.load(Ordering::Relaxed),
            spans_exported: h.spans_exported.load(Ordering::Relaxed),
            spans_dropped: h.spans_dropped.load(Ordering::Relaxed),
        },
    )
}
