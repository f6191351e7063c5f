//! Bio-based volumes (device-mapper, md) and the devices they sit on, so
//! that a volume's I/O can be shown with its disk's.

use serde::{Deserialize, Serialize};

use super::core::DeviceRef;

/// A device-mapper or md disk, as sysfs describes it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Volume {
    pub device: DeviceRef,
    /// "dm" or "md".
    pub kind: String,
    /// The name a user knows: the dm name (LVM's "vg-lv", dm-crypt's
    /// mapping) or the md array's.
    pub name: String,
    /// The disks it sits on (sysfs `slaves`), by kernel name.
    pub lower: Vec<String>,
}
