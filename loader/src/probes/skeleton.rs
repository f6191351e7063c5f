//! The steps every object's `start` opens its skeleton with: the open,
//! and the `.rodata` its settings go in before the load.

use anyhow::{Context, Result};
use libbpf_rs::skel::SkelBuilder;

use crate::probes::objects::open_object;

/// Opens the skeleton `B` builds, on an open object that lives as long as
/// the process; `object` names it in the error ("nvme", "locks").
pub(crate) fn open_skel<B>(object: &str) -> Result<B::Output>
where
    B: SkelBuilder<'static> + Default,
{
    B::default()
        .open(open_object())
        .with_context(|| format!("opening the {object} BPF object"))
}

/// The `.rodata` of an opened skeleton (`&mut open.maps.rodata_data`): an
/// object's settings, read-only once it is loaded.
pub(crate) fn rodata<'a, T>(section: &'a mut Option<&mut T>, object: &str) -> Result<&'a mut T> {
    section
        .as_deref_mut()
        .with_context(|| format!("{object} BPF object has no .rodata"))
}
