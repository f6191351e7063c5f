//! The encoders' unit tests' one way to the OpenMetrics text: a snapshot
//! (and self metrics) in, the text out, an encoding error a panic.

use std::sync::Arc;

use super::encode::encode_openmetrics;
use super::expose::ExpositionOptions;
use crate::model::{SelfMetrics, Snapshot};

/// `snap`'s text with no self metrics, under the fleet defaults.
pub(crate) fn text_of(snap: Snapshot) -> String {
    text_with(snap, SelfMetrics::default(), &ExpositionOptions::default())
}

/// `snap`'s text with the self metrics `extra`, under `opts`.
pub(crate) fn text_with(snap: Snapshot, extra: SelfMetrics, opts: &ExpositionOptions) -> String {
    encode_openmetrics(&Arc::new(snap), &Arc::new(extra), opts).unwrap()
}
