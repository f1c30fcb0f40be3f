//! Memory measures for the benches: a global allocator that counts the bytes currently allocated (exact live
//! heap bytes, which nothing else gives), and the process's resident set.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// The system allocator, counting the bytes currently allocated (installed as the bench's global allocator).
struct Counting;

static LIVE_HEAP: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_HEAP.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on as it came.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_HEAP.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE_HEAP.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_HEAP.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator with `layout`; the caller guarantees `new_size` is valid.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

pub fn heap() -> i64 {
    LIVE_HEAP.load(Ordering::Relaxed)
}

/// The process's resident set in bytes (Linux; 0 elsewhere).
pub fn rss() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<i64>().ok());
    kib.unwrap_or(0) * 1024
}
