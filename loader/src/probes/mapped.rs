//! A BPF array map (BPF_F_MMAPABLE) mapped into user space: reading
//! thousands of entries per poll costs memory loads, not a syscall each.

use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{ensure, Result};

pub struct MappedArray<T> {
    base: *mut T,
    entries: usize,
    map_len: usize,
    _t: PhantomData<T>,
}

// SAFETY: the mapping is shared memory that the kernel updates with atomic
// adds; this side only makes volatile whole-field loads and stores of
// plain-old-data, from whichever thread owns the tracer.
unsafe impl<T> Send for MappedArray<T> {}

impl<T: Copy> MappedArray<T> {
    /// Maps the whole array behind `map` (`entries` values of T).
    pub fn new(map: &impl AsFd, entries: usize) -> Result<MappedArray<T>> {
        // The kernel lays array values out at 8-byte strides.
        ensure!(
            std::mem::size_of::<T>().is_multiple_of(8),
            "value size not a multiple of 8"
        );
        let page = 4096;
        let len = (entries * std::mem::size_of::<T>()).div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        ensure!(
            p != libc::MAP_FAILED,
            "mmap of a BPF array: {}",
            std::io::Error::last_os_error()
        );
        Ok(MappedArray {
            base: p as *mut T,
            entries,
            map_len: len,
            _t: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// A copy of entry `i`. Each aligned u64 field is read whole; fields may
    /// be from instants microseconds apart, which deltas do not mind.
    pub fn get(&self, i: usize) -> T {
        assert!(i < self.entries);
        // SAFETY: in bounds of the mapping; T is plain-old-data.
        unsafe { std::ptr::read_volatile(self.base.add(i)) }
    }

    /// `n` consecutive entries from `i`.
    pub fn range(&self, i: usize, n: usize) -> Vec<T> {
        (i..i + n).map(|j| self.get(j)).collect()
    }

    /// Zeroes `n` consecutive entries from `i` (entries nothing updates any more).
    pub fn zero(&self, i: usize, n: usize) {
        assert!(i + n <= self.entries);
        // SAFETY: in bounds of the mapping; all-zero is a valid T.
        unsafe { std::ptr::write_bytes(self.base.add(i), 0, n) };
    }
}

impl<T> Drop for MappedArray<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping what new() mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}
