//! Names of lock-site stacks: kernel addresses symbolized through kallsyms
//! (blazesym), each stack once.

use std::collections::HashMap;

use anyhow::{Context, Result};
use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;

use super::sites;

/// Kernel symbolizer over kallsyms: one frame name per address.
pub struct KernelSymbolizer {
    sym: Symbolizer,
}

impl Default for KernelSymbolizer {
    fn default() -> Self {
        KernelSymbolizer {
            sym: Symbolizer::new(),
        }
    }
}

impl KernelSymbolizer {
    /// "func+0x1f" per address (None where unknown). Return addresses
    /// (every frame but the first of a stack) are looked up one byte
    /// earlier: a call at the end of a function returns past its end.
    pub fn symbolize(
        &self,
        addrs: &[u64],
        return_addrs: bool,
    ) -> Result<Vec<Option<(String, u64)>>> {
        let src = Source::Kernel(Kernel {
            kallsyms: MaybeDefault::Default,
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Default::default()
        });
        let look: Vec<u64> = addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                if return_addrs && i > 0 {
                    a.saturating_sub(1)
                } else {
                    a
                }
            })
            .collect();
        let syms = self
            .sym
            .symbolize(&src, Input::AbsAddr(&look))
            .context("symbolizing kernel addresses (kallsyms)")?;
        Ok(syms
            .into_iter()
            .zip(addrs)
            .map(|(s, &a)| match s {
                Symbolized::Sym(s) => Some((s.name.to_string(), a.saturating_sub(s.addr))),
                Symbolized::Unknown(_) => None,
            })
            .collect())
    }
}

/// The site and frames of each stack id, symbolized once and cached.
#[derive(Default)]
pub struct StackNames {
    symbolizer: KernelSymbolizer,
    /// stack id -> (site, frames "func+0xoff")
    cache: HashMap<u32, (String, Vec<String>)>,
}

impl StackNames {
    /// The site and frames (innermost first) of the stack `addrs` read for
    /// `id`; None: not readable yet (the BPF side is still writing it), so
    /// not cached.
    pub fn get(
        &mut self,
        id: u32,
        addrs: impl FnOnce() -> Option<Vec<u64>>,
    ) -> (String, Vec<String>) {
        if let Some(s) = self.cache.get(&id) {
            return s.clone();
        }
        let Some(addrs) = addrs().filter(|a| !a.is_empty()) else {
            return ("(no stack)".into(), Vec::new());
        };
        let syms = self.symbolizer.symbolize(&addrs, true).unwrap_or_default();
        let mut names = Vec::new();
        let mut frames = Vec::new();
        for (i, a) in addrs.iter().enumerate() {
            match syms.get(i).cloned().flatten() {
                Some((n, off)) => {
                    frames.push(format!("{n}+{off:#x}"));
                    names.push(n);
                }
                None => {
                    frames.push(format!("{a:#x}"));
                    names.push(format!("{a:#x}"));
                }
            }
        }
        let v = (sites::site_name(&names), frames);
        self.cache.insert(id, v.clone());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resolves a known kernel function's address from /proc/kallsyms (as
    /// root: addresses read as 0 otherwise) through blazesym.
    #[test]
    fn symbolizes_a_kallsyms_address() {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let syms = sites::parse_kallsyms_text(&text);
        assert!(
            !syms.is_empty(),
            "no addresses in /proc/kallsyms: run as root"
        );
        let mut checked = 0;
        for want in ["_raw_spin_lock", "dd_dispatch_request", "blk_mq_submit_bio"] {
            let Some(s) = syms.iter().find(|s| s.name == want) else {
                continue;
            };
            let got = KernelSymbolizer::default()
                .symbolize(&[s.addr + 4], false)
                .unwrap();
            assert_eq!(
                got[0],
                Some((want.to_string(), 4)),
                "{want} at {:#x}",
                s.addr
            );
            // As a return address (not first frame): one byte earlier, same function.
            let got = KernelSymbolizer::default()
                .symbolize(&[0, s.addr + 1], true)
                .unwrap();
            assert_eq!(got[1].as_ref().map(|g| g.0.as_str()), Some(want));
            checked += 1;
        }
        assert!(checked > 0, "none of the known functions is in kallsyms");
    }
}
