//! iocost's units, as block/blk-iocost.c defines them.

/// iocost's virtual time: 2^37 per second (VTIME_PER_SEC).
pub const VTIME_PER_SEC: u64 = 1 << 37;
/// The model's page (IOC_PAGE_SIZE).
pub const PAGE_SIZE: u64 = 4096;
/// Size classes: <= 4 KiB, 8 KiB, ..., >= 1 MiB (IOW_COST_SIZES).
pub const SIZES: usize = 9;
