//! Pure logic of the lock panel and exports: naming a lock site from its
//! symbolized stack, lock kinds, folded stacks for flame graphs, the
//! bounded top-N + "other" export, and which kernel text is block layer.
//! Nothing here touches the kernel.

use std::collections::{BTreeMap, HashMap};

use iowarden_exporters::{CgroupRef, LockSiteRow};

use crate::locks_skel::types::lk_flag;

/// "foo.constprop.0" -> "foo": the compiler's clone suffixes, which differ
/// between builds of the same source.
pub fn strip_clone_suffix(name: &str) -> &str {
    match name.find('.') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

/// Locking primitives and the tracing machinery between the lock and its
/// caller: never the site a user wants named.
pub fn is_lock_frame(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "_raw_spin_",
        "_raw_read_",
        "_raw_write_",
        "raw_spin_rq_",
        "_raw_spin_rq_",
        "__raw_spin_",
        "do_raw_spin_",
        "do_raw_read_",
        "do_raw_write_",
        "queued_spin_lock",
        "native_queued_spin_lock",
        "__pv_queued_spin_lock",
        "pv_queued_spin_lock",
        "queued_read_lock",
        "queued_write_lock",
        "mutex_lock",
        "__mutex_lock",
        "mutex_spin_on_owner",
        "mutex_optimistic_spin",
        "ww_mutex_lock",
        "__ww_mutex_lock",
        "osq_lock",
        "rwsem_",
        "down_read",
        "down_write",
        "__down_",
        "down_timeout",
        "down_interruptible",
        "down_killable",
        "rt_mutex",
        "__rt_mutex",
        "rt_spin_lock",
        "rtlock_",
        "percpu_down_",
        "__percpu_down_",
        "percpu_rwsem_",
        "lock_acquire",
        "__lock_acquire",
        "bpf_trace_run",
        "__bpf_trace_",
        "__traceiter_",
        "trace_contention_",
        "bpf_prog_",
        "__bpf_prog_",
    ];
    let n = strip_clone_suffix(name);
    n == "down" || PREFIXES.iter().any(|p| n.starts_with(p))
}

/// The site of a stack (function names, innermost first): its innermost
/// frame that is not locking or tracing machinery, clone suffix removed.
pub fn site_name<S: AsRef<str>>(frames: &[S]) -> String {
    frames
        .iter()
        .map(|f| f.as_ref())
        .find(|f| !f.is_empty() && !is_lock_frame(f))
        .map(|f| strip_clone_suffix(f).to_string())
        .unwrap_or_else(|| "(unknown)".into())
}

/// Lock kind from contention_begin's flags (include/trace/events/lock.h,
/// mirrored by enum lk_flag in bpf/locks.h).
pub fn kind_name(flags: u32) -> String {
    const SPIN: u32 = lk_flag::LK_F_SPIN.0;
    const READ: u32 = lk_flag::LK_F_READ.0;
    const WRITE: u32 = lk_flag::LK_F_WRITE.0;
    const RT: u32 = lk_flag::LK_F_RT.0;
    const PERCPU: u32 = lk_flag::LK_F_PERCPU.0;
    const MUTEX: u32 = lk_flag::LK_F_MUTEX.0;
    const KINDS: &[(u32, &str)] = &[
        (SPIN, "spin"),
        (SPIN | READ, "rwlock-read"),
        (SPIN | WRITE, "rwlock-write"),
        (READ, "rwsem-read"),
        (WRITE, "rwsem-write"),
        (MUTEX, "mutex"),
        (RT, "rtmutex"),
        (PERCPU | READ, "percpu-rwsem-read"),
        (PERCPU | WRITE, "percpu-rwsem-write"),
    ];
    const BITS: &[(u32, &str)] = &[
        (SPIN, "spin"),
        (READ, "read"),
        (WRITE, "write"),
        (RT, "rt"),
        (PERCPU, "percpu"),
        (MUTEX, "mutex"),
    ];
    if let Some((_, name)) = KINDS.iter().find(|(f, _)| *f == flags) {
        return (*name).into();
    }
    let v: Vec<&str> = BITS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if v.is_empty() {
        "unknown".into()
    } else {
        v.join("+")
    }
}

fn folded_frame(f: &str) -> String {
    f.chars()
        .map(|c| {
            if c == ';' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// One line of Brendan Gregg's folded format: root first ("cgroup;outer;
/// ...;inner"), then the value. Lock and tracing frames are kept: they
/// show which primitive the wait was in.
pub fn folded_line<S: AsRef<str>>(cgroup: &str, frames_inner_first: &[S], value: u64) -> String {
    let mut parts = vec![folded_frame(if cgroup.is_empty() {
        "(unknown cgroup)"
    } else {
        cgroup
    })];
    parts.extend(
        frames_inner_first
            .iter()
            .rev()
            .map(|f| folded_frame(strip_clone_suffix(f.as_ref()))),
    );
    format!("{} {value}", parts.join(";"))
}

/// The bounded export: up to `n` sites by name, everything else summed per
/// cgroup as site "other". A site is named once it ranks in the top `n` and
/// stays named (a site leaving the set would make counters go backwards);
/// its row counts from the poll it was named at, its earlier waits stay in
/// "other", so every row is monotonic.
#[derive(Debug)]
pub struct TopSites {
    n: usize,
    /// site -> cgroup id -> (count, wait) at the time the site was named
    named: BTreeMap<String, HashMap<u64, (u64, f64)>>,
}

impl TopSites {
    pub fn new(n: usize) -> TopSites {
        TopSites {
            n,
            named: BTreeMap::new(),
        }
    }

    /// Drops what is kept for a cgroup whose series were released.
    pub fn forget_cgroup(&mut self, id: u64) {
        for base in self.named.values_mut() {
            base.remove(&id);
        }
    }

    /// `rows`: cumulative (site, cgroup, count, wait seconds), any order,
    /// possibly several per (site, cgroup).
    pub fn update(&mut self, rows: &[(String, CgroupRef, u64, f64)]) -> Vec<LockSiteRow> {
        let mut per: BTreeMap<(String, u64), (CgroupRef, u64, f64)> = BTreeMap::new();
        let mut site_wait: HashMap<&str, f64> = HashMap::new();
        for (site, cg, c, w) in rows {
            let e = per
                .entry((site.clone(), cg.id))
                .or_insert_with(|| (cg.clone(), 0, 0.0));
            e.1 += c;
            e.2 += w;
            *site_wait.entry(site.as_str()).or_default() += w;
        }
        let mut ranked: Vec<(&str, f64)> = site_wait.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        for (site, wait) in ranked {
            if self.named.len() >= self.n || wait <= 0.0 {
                break;
            }
            if site == "other" || self.named.contains_key(site) {
                continue;
            }
            let base = per
                .iter()
                .filter(|((s, _), _)| s == site)
                .map(|((_, id), v)| (*id, (v.1, v.2)))
                .collect();
            self.named.insert(site.to_string(), base);
        }
        let mut out = Vec::new();
        let mut other: BTreeMap<u64, (CgroupRef, u64, f64)> = BTreeMap::new();
        for ((site, id), (cg, c, w)) in &per {
            match self.named.get(site) {
                Some(base) => {
                    let (bc, bw) = base.get(id).copied().unwrap_or((0, 0.0));
                    out.push(LockSiteRow {
                        site: site.clone(),
                        cgroup: cg.clone(),
                        count: c.saturating_sub(bc),
                        wait_seconds: (w - bw).max(0.0),
                    });
                    // What it had before being named stays in "other".
                    let o = other.entry(*id).or_insert_with(|| (cg.clone(), 0, 0.0));
                    o.1 += bc.min(*c);
                    o.2 += bw.min(*w);
                }
                None => {
                    let o = other.entry(*id).or_insert_with(|| (cg.clone(), 0, 0.0));
                    o.1 += c;
                    o.2 += w;
                }
            }
        }
        for (_, (cg, c, w)) in other {
            out.push(LockSiteRow {
                site: "other".into(),
                cgroup: cg,
                count: c,
                wait_seconds: w,
            });
        }
        out
    }
}

/// Whether a kernel function (and the module it is in, if any) belongs to
/// the block layer: block/, I/O schedulers, blk-mq drivers and their
/// helpers. By name: kallsyms does not say which file a function is from.
pub fn is_block_symbol(name: &str, module: Option<&str>) -> bool {
    const MODULES: &[&str] = &[
        "nvme",
        "nvme_core",
        "loop",
        "virtio_blk",
        "mq_deadline",
        "bfq",
        "kyber_iosched",
        "null_blk",
        "scsi_mod",
        "sd_mod",
        "dm_mod",
        "md_mod",
        "ahci",
        "libata",
        "zram",
        "nbd",
        "rbd",
        "xen_blkfront",
    ];
    if let Some(m) = module {
        if MODULES.contains(&m) {
            return true;
        }
    }
    const PREFIXES: &[&str] = &[
        "blk",
        "__blk",
        "bio",
        "__bio",
        "bdev",
        "blkdev",
        "__blkdev",
        "blkg",
        "blkcg",
        "elv",
        "__elv",
        "elevator",
        "dd_",
        "deadline_",
        "bfq",
        "__bfq",
        "kyber",
        "nvme",
        "__nvme",
        "loop_",
        "lo_",
        "submit_bio",
        "__submit_bio",
        "disk_",
        "ioc_",
        "iocg",
        "iolatency",
        "req_",
        "rq_qos",
        "__rq_qos",
        "wbt_",
        "scsi_",
        "__scsi",
        "sd_",
        "virtblk",
        "virtio_queue_rq",
        "dm_",
        "__dm_",
        "md_",
        "bd_",
        "part_",
        "bsg",
        "throtl",
        "tg_",
        "blockdev",
        "bvec",
        "sbitmap",
        "__sbitmap",
        "sbq_",
        "hctx_",
        "ioprio",
        "iomap_dio",
        "__iomap_dio",
    ];
    let n = strip_clone_suffix(name);
    PREFIXES.iter().any(|p| n.starts_with(p))
}

/// One text symbol of /proc/kallsyms.
#[derive(Debug, Clone, PartialEq)]
pub struct KSym {
    pub addr: u64,
    pub name: String,
    pub module: Option<String>,
}

/// Text symbols of /proc/kallsyms ("addr type name [module]"), sorted by address.
pub fn parse_kallsyms_text(text: &str) -> Vec<KSym> {
    let mut out: Vec<KSym> = text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let addr = u64::from_str_radix(it.next()?, 16).ok()?;
            let ty = it.next()?;
            let name = it.next()?;
            if !matches!(ty, "t" | "T") || addr == 0 {
                return None;
            }
            let module = it
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string());
            Some(KSym {
                addr,
                name: name.to_string(),
                module,
            })
        })
        .collect();
    out.sort_by_key(|s| s.addr);
    out
}

/// Sorted, disjoint [start, end) ranges covering the block-layer functions:
/// each function ends where the next symbol starts; adjacent block
/// functions merge. Above `max` ranges, the closest ones merge (a few
/// non-block functions between them then count as block layer).
pub fn block_ranges(syms: &[KSym], max: usize) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (i, s) in syms.iter().enumerate() {
        if !is_block_symbol(&s.name, s.module.as_deref()) {
            continue;
        }
        // The last symbol's size is unknown: give it a page.
        let end = syms
            .get(i + 1)
            .map_or(s.addr + 4096, |n| n.addr.max(s.addr + 1));
        match out.last_mut() {
            Some(last) if last.1 >= s.addr => last.1 = last.1.max(end),
            _ => out.push((s.addr, end)),
        }
    }
    while out.len() > max.max(1) {
        // Merge the pair with the smallest gap.
        let i = (0..out.len() - 1)
            .min_by_key(|&i| out[i + 1].0 - out[i].1)
            .unwrap();
        out[i].1 = out[i + 1].1;
        out.remove(i + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_is_innermost_non_lock_frame() {
        let st = [
            "bpf_trace_run2",
            "__bpf_trace_contention_begin",
            "queued_spin_lock_slowpath",
            "_raw_spin_lock",
            "dd_dispatch_request",
            "__blk_mq_do_dispatch_sched",
            "blk_mq_run_hw_queue",
        ];
        assert_eq!(site_name(&st), "dd_dispatch_request");
        assert_eq!(
            site_name(&[
                "__mutex_lock.constprop.0",
                "mutex_lock",
                "blkcg_print_stat.isra.0"
            ]),
            "blkcg_print_stat"
        );
        assert_eq!(
            site_name(&[
                "rwsem_down_read_slowpath",
                "down_read",
                "bfq_insert_requests"
            ]),
            "bfq_insert_requests"
        );
        assert_eq!(site_name(&["_raw_spin_lock_irqsave"]), "(unknown)");
        assert_eq!(site_name::<&str>(&[]), "(unknown)");
        // A function that merely starts like a lock name is not one.
        assert!(!is_lock_frame("downstream_fn"));
        assert!(is_lock_frame("down"));
    }

    #[test]
    fn kinds() {
        assert_eq!(kind_name(1), "spin");
        assert_eq!(kind_name(32), "mutex");
        assert_eq!(kind_name(3), "rwlock-read");
        assert_eq!(kind_name(2), "rwsem-read");
        assert_eq!(kind_name(8 | 2), "read+rt");
        assert_eq!(kind_name(0), "unknown");
    }

    #[test]
    fn folded_is_root_first_with_value() {
        let l = folded_line(
            "/w",
            &[
                "_raw_spin_lock",
                "dd_dispatch_request.isra.0",
                "blk_mq_run_hw_queue",
            ],
            1234,
        );
        assert_eq!(
            l,
            "/w;blk_mq_run_hw_queue;dd_dispatch_request;_raw_spin_lock 1234"
        );
        assert_eq!(folded_line("", &["a b;c"], 1), "(unknown_cgroup);a_b_c 1");
    }

    fn cg(id: u64) -> CgroupRef {
        CgroupRef {
            id,
            path: format!("/c{id}"),
        }
    }

    fn row<'a>(rows: &'a [LockSiteRow], site: &str, id: u64) -> Option<&'a LockSiteRow> {
        rows.iter().find(|r| r.site == site && r.cgroup.id == id)
    }

    #[test]
    fn top_n_plus_other_is_bounded_and_monotonic() {
        let mut t = TopSites::new(2);
        let r = t.update(&[
            ("a".into(), cg(1), 10, 5.0),
            ("b".into(), cg(1), 10, 3.0),
            ("c".into(), cg(1), 10, 1.0),
            ("c".into(), cg(2), 1, 0.5),
        ]);
        // Named at this poll: their rows start at zero, the waits so far stay in other.
        assert_eq!(row(&r, "a", 1).unwrap().wait_seconds, 0.0);
        assert!(row(&r, "c", 1).is_none());
        assert_eq!(row(&r, "other", 1).unwrap().wait_seconds, 9.0);
        assert_eq!(row(&r, "other", 2).unwrap().wait_seconds, 0.5);
        // c overtakes everything later: the set is full, c stays in other.
        let r2 = t.update(&[
            ("a".into(), cg(1), 11, 6.0),
            ("b".into(), cg(1), 11, 3.5),
            ("c".into(), cg(1), 20, 30.0),
            ("c".into(), cg(2), 1, 0.5),
            ("d".into(), cg(3), 4, 2.0),
        ]);
        assert_eq!(row(&r2, "a", 1).unwrap().wait_seconds, 1.0);
        assert_eq!(row(&r2, "b", 1).unwrap().count, 1);
        assert_eq!(row(&r2, "other", 1).unwrap().wait_seconds, 5.0 + 3.0 + 30.0);
        assert_eq!(row(&r2, "other", 3).unwrap().wait_seconds, 2.0);
        let sites: std::collections::BTreeSet<&str> = r2.iter().map(|r| r.site.as_str()).collect();
        assert_eq!(
            sites.into_iter().collect::<Vec<_>>(),
            vec!["a", "b", "other"]
        );
        // Every row only grows, and nothing is lost from the total.
        for x in &r {
            let y = row(&r2, &x.site, x.cgroup.id).unwrap();
            assert!(
                y.wait_seconds >= x.wait_seconds && y.count >= x.count,
                "{x:?} -> {y:?}"
            );
        }
        let total: f64 = r2.iter().map(|r| r.wait_seconds).sum();
        assert!((total - (6.0 + 3.5 + 30.0 + 0.5 + 2.0)).abs() < 1e-9);
    }

    #[test]
    fn block_ranges_merge_neighbours_and_stay_bounded() {
        let text = "\
ffffffff81000000 T _stext
ffffffff81000100 t blk_mq_run_hw_queue
ffffffff81000200 t dd_dispatch_request
ffffffff81000300 D some_data
ffffffff81000300 T memcpy
ffffffff81000400 t bio_endio
ffffffff81000500 T schedule
ffffffff81000600 t nvme_queue_rq\t[nvme]
ffffffff81000700 t helper\t[nvme]
ffffffff81000800 t other_fn\t[ext4]
";
        let syms = parse_kallsyms_text(text);
        assert_eq!(syms.len(), 9, "data symbols skipped");
        assert_eq!(syms[6].module.as_deref(), Some("nvme"));
        let r = block_ranges(&syms, 16);
        assert_eq!(
            r,
            vec![
                (0xffffffff81000100, 0xffffffff81000300),
                (0xffffffff81000400, 0xffffffff81000500),
                (0xffffffff81000600, 0xffffffff81000800),
            ]
        );
        let r = block_ranges(&syms, 2);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0], (0xffffffff81000100, 0xffffffff81000500));
        assert!(r.windows(2).all(|w| w[0].1 <= w[1].0));
    }
}
