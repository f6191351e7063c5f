//! `top`'s verdict, one line per window: measured from the culprit account
//! (views/culprits.rs) whenever the window has one, inferred from
//! device-time shares and p99s only when it has none (the account switched
//! off, or a kernel that cannot keep it). The line says which.

use std::collections::HashMap;
use std::fmt;

use crate::views::culprits::Account;
use crate::views::top::{fmt_lat, Row};

/// What a verdict rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basis {
    /// The culprit account: whose requests the victim's waited behind.
    Measured,
    /// Device-time shares and p99s: a guess from who was busy.
    Inferred,
    /// No block I/O to judge.
    Nothing,
}

/// What a verdict found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Finding {
    NoisyNeighbour,
    /// A victim held mostly by its own limits (measured only).
    OwnLimits,
    None,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub basis: Basis,
    pub finding: Finding,
    /// The finding, without the basis (Display prefixes it).
    pub text: String,
}

impl Verdict {
    /// Before the first window.
    pub fn waiting() -> Verdict {
        Verdict {
            basis: Basis::Nothing,
            finding: Finding::None,
            text: "no noisy neighbour: no window observed yet".into(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let basis = match self.basis {
            Basis::Measured => "measured: ",
            Basis::Inferred => "inferred from device-time shares: ",
            Basis::Nothing => "",
        };
        write!(f, "{basis}{}", self.text)
    }
}

/// What a finding is about, to count the windows that found it: the
/// device and the culprit (or the victim held by its own limits).
type Subject = (Finding, String, String);

/// The measured verdict of one window's accounts (at least one): the
/// victim that spent the largest part of its time behind other cgroups, if
/// at least half, named with the one it waited behind the longest; else
/// the one held by its own limits for at least half its time; else none.
pub fn measured(accounts: &[Account]) -> (Verdict, Option<Subject>) {
    let most = |f: fn(&Account) -> f64| {
        accounts
            .iter()
            .max_by(|a, b| f(a).total_cmp(&f(b)))
            .filter(|a| f(a) >= 0.5)
    };
    let verdict = |finding, text| Verdict {
        basis: Basis::Measured,
        finding,
        text,
    };
    if let Some((a, (culprit, part))) =
        most(Account::behind_others).and_then(|a| Some((a, a.main_culprit()?)))
    {
        let all = a.behind_others();
        let in_all = if all - part >= 0.005 {
            format!(" ({:.0}% behind others in all)", all * 100.0)
        } else {
            String::new()
        };
        let text = format!(
            "noisy neighbour on {}: {} waited behind {culprit} for {:.0}% of its request time{in_all}",
            a.device,
            a.victim,
            part * 100.0
        );
        let subject = (Finding::NoisyNeighbour, a.device.clone(), culprit.into());
        return (verdict(Finding::NoisyNeighbour, text), Some(subject));
    }
    if let Some(a) = most(Account::own_limits) {
        let text = format!(
            "held by its own limits: {} on {}, {:.0}% of its request time",
            a.victim,
            a.device,
            a.own_limits() * 100.0
        );
        let subject = (Finding::OwnLimits, a.device.clone(), a.victim.clone());
        return (verdict(Finding::OwnLimits, text), Some(subject));
    }
    let text = match accounts
        .iter()
        .max_by(|a, b| a.behind_others().total_cmp(&b.behind_others()))
    {
        Some(a) => format!(
            "no noisy neighbour: no cgroup waited behind others for half its request time \
             (the most: {} on {}, {:.0}%)",
            a.victim,
            a.device,
            a.behind_others() * 100.0
        ),
        None => "no noisy neighbour: no account in this window".into(),
    };
    (verdict(Finding::None, text), None)
}

/// Judges every window: measured where the window has an account, and
/// inferred from the rows in every window (the inference keeps each
/// cgroup's p99 baseline: the lowest p99 it showed in any window with
/// enough I/O, a cgroup's best recent latency being what it gets when left
/// alone). The inference flags the cgroup that holds most of a device's
/// time while another cgroup's p99 rises above its baseline.
pub struct NoisyNeighbourDetector {
    pub share_threshold: f64,
    pub rise_factor: f64,
    pub min_ios: u64,
    baseline: HashMap<(String, String), f64>,
    /// Windows that found each subject, per basis.
    flagged: HashMap<(Basis, Subject), u32>,
    measured_culprit: Option<Verdict>,
    inferred_culprit: Option<Verdict>,
    /// Whether any window had an account.
    measured_any: bool,
}

impl Default for NoisyNeighbourDetector {
    fn default() -> Self {
        NoisyNeighbourDetector {
            share_threshold: 0.5,
            rise_factor: 1.5,
            min_ios: 20,
            baseline: HashMap::new(),
            flagged: HashMap::new(),
            measured_culprit: None,
            inferred_culprit: None,
            measured_any: false,
        }
    }
}

impl NoisyNeighbourDetector {
    /// Feeds one window's rows and accounts; returns its verdict.
    pub fn observe(&mut self, rows: &[Row], accounts: &[Account]) -> Verdict {
        let (inferred, subject) = self.infer(rows);
        self.note(&inferred, subject);
        self.update_baselines(rows);
        if accounts.is_empty() {
            return inferred;
        }
        self.measured_any = true;
        let (verdict, subject) = measured(accounts);
        self.note(&verdict, subject);
        verdict
    }

    /// The verdict of the last subject found in at least two windows:
    /// measured once any window had an account, else inferred.
    pub fn culprit(&self) -> Option<&Verdict> {
        if self.measured_any {
            self.measured_culprit.as_ref()
        } else {
            self.inferred_culprit.as_ref()
        }
    }

    fn note(&mut self, v: &Verdict, subject: Option<Subject>) {
        let Some(subject) = subject else { return };
        let n = self.flagged.entry((v.basis, subject)).or_default();
        *n += 1;
        if *n < 2 {
            return;
        }
        match v.basis {
            Basis::Measured => self.measured_culprit = Some(v.clone()),
            _ => self.inferred_culprit = Some(v.clone()),
        }
    }

    /// The inferred verdict against the baselines of the windows before.
    fn infer(&self, rows: &[Row]) -> (Verdict, Option<Subject>) {
        let enough = |r: &&Row| r.ios >= self.min_ios;
        let verdict = |finding, text| Verdict {
            basis: Basis::Inferred,
            finding,
            text,
        };
        for dom in rows
            .iter()
            .filter(enough)
            .filter(|r| r.device_share >= self.share_threshold)
        {
            let others = rows
                .iter()
                .filter(enough)
                .filter(|r| r.device == dom.device && r.cgroup != dom.cgroup);
            for victim in others {
                let key = (victim.device.clone(), victim.cgroup.clone());
                let (Some(p99), Some(&base)) = (victim.total_p99, self.baseline.get(&key)) else {
                    continue;
                };
                if base > 0.0 && p99 >= base * self.rise_factor {
                    let text = format!(
                        "noisy neighbour on {}: {} holds {:.0}% of device time while {} p99 rose {:.1}x ({} -> {})",
                        dom.device,
                        dom.cgroup,
                        dom.device_share * 100.0,
                        victim.cgroup,
                        p99 / base,
                        fmt_lat(Some(base)),
                        fmt_lat(Some(p99))
                    );
                    let subject = (
                        Finding::NoisyNeighbour,
                        dom.device.clone(),
                        dom.cgroup.clone(),
                    );
                    return (verdict(Finding::NoisyNeighbour, text), Some(subject));
                }
            }
        }
        let top = rows
            .iter()
            .max_by(|a, b| a.device_share.total_cmp(&b.device_share));
        match top {
            Some(r) if r.ios > 0 => {
                let text = format!(
                    "no noisy neighbour: top device-time share is {} on {} ({:.0}%), no other cgroup's p99 rose {:.1}x",
                    r.cgroup,
                    r.device,
                    r.device_share * 100.0,
                    self.rise_factor
                );
                (verdict(Finding::None, text), None)
            }
            _ => {
                let text = "no noisy neighbour: no block I/O in this window".into();
                let nothing = Verdict {
                    basis: Basis::Nothing,
                    finding: Finding::None,
                    text,
                };
                (nothing, None)
            }
        }
    }

    fn update_baselines(&mut self, rows: &[Row]) {
        for r in rows.iter().filter(|r| r.ios >= self.min_ios) {
            if let Some(p) = r.total_p99 {
                let b = self
                    .baseline
                    .entry((r.device.clone(), r.cgroup.clone()))
                    .or_insert(p);
                *b = b.min(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::culprits::Part;
    use iowarden_exporters::Op;

    fn row(cg: &str, share: f64, p99_ms: f64) -> Row {
        Row {
            device: "loop0".into(),
            cgroup: cg.into(),
            iops: 100.0,
            bytes_per_s: 1e6,
            device_share: share,
            queue_p50: None,
            queue_p99: None,
            device_p50: None,
            device_p99: None,
            total_p99: Some(p99_ms / 1e3),
            held_share: None,
            ios: 100,
        }
    }

    fn behind(cgroup: &str) -> Part {
        Part::Behind {
            cgroup: cgroup.into(),
            op: Op::Write,
            mean_bytes: 131072.0,
        }
    }

    fn account(victim: &str, parts: Vec<(Part, f64)>) -> Account {
        Account {
            device: "loop0".into(),
            victim: victim.into(),
            seconds: parts.iter().map(|(_, s)| s).sum(),
            parts,
        }
    }

    #[test]
    fn names_the_hog_once_the_victim_suffers() {
        let mut d = NoisyNeighbourDetector::default();
        let v = d.observe(&[row("/victim", 1.0, 0.2)], &[]);
        assert!(v.text.starts_with("no noisy"), "{v}");
        let v = d.observe(&[row("/hog", 0.9, 5.0), row("/victim", 0.1, 0.9)], &[]);
        assert_eq!(
            v.to_string(),
            "inferred from device-time shares: noisy neighbour on loop0: /hog holds 90% of \
             device time while /victim p99 rose 4.5x (200us -> 900us)"
        );
        assert_eq!(d.culprit(), None, "one window is not enough");
        d.observe(&[row("/hog", 0.9, 5.0), row("/victim", 0.1, 0.8)], &[]);
        let c = d.culprit().unwrap();
        assert!(c.text.contains("/hog") && c.basis == Basis::Inferred, "{c}");
    }

    #[test]
    fn steady_sharing_and_dominance_without_victims_are_not_flagged() {
        let mut d = NoisyNeighbourDetector::default();
        for _ in 0..5 {
            let v = d.observe(&[row("/a", 0.5, 1.0), row("/b", 0.5, 1.0)], &[]);
            assert_eq!(v.finding, Finding::None, "{v}");
        }
        let mut d = NoisyNeighbourDetector::default();
        for _ in 0..5 {
            let v = d.observe(&[row("/big", 0.95, 3.0), row("/small", 0.05, 0.3)], &[]);
            assert_eq!(v.finding, Finding::None, "{v}");
        }
        assert_eq!(d.culprit(), None);
        assert_eq!(
            d.observe(&[], &[]).to_string(),
            "no noisy neighbour: no block I/O in this window"
        );
    }

    /// The run: the account named the writer, the shares named it
    /// too, and top's last word was the inferred one.
    #[test]
    fn the_measured_verdict_wins_and_is_the_last_word() {
        let mut d = NoisyNeighbourDetector::default();
        d.observe(&[row("/victim", 1.0, 0.2)], &[]);
        let rows = [row("/hog", 0.9, 5.0), row("/victim", 0.1, 0.9)];
        let accounts = [account(
            "/victim",
            vec![(behind("/hog"), 0.8), (Part::Service, 0.2)],
        )];
        for _ in 0..2 {
            let v = d.observe(&rows, &accounts);
            assert_eq!(
                v.to_string(),
                "measured: noisy neighbour on loop0: /victim waited behind /hog for 80% of its \
                 request time"
            );
        }
        let last = d.culprit().unwrap();
        assert_eq!(last.basis, Basis::Measured, "{last}");
        assert!(last
            .to_string()
            .starts_with("measured: noisy neighbour on loop0: /victim"));
    }

    #[test]
    fn with_an_account_and_no_culprit_the_inferred_one_is_not_the_last_word() {
        let mut d = NoisyNeighbourDetector::default();
        d.observe(&[row("/victim", 1.0, 0.2)], &[]);
        // The shares would blame /big; the account says /victim mostly
        // served itself.
        let rows = [row("/big", 0.9, 5.0), row("/victim", 0.1, 0.9)];
        let accounts = [account(
            "/victim",
            vec![(behind("/big"), 0.2), (Part::Service, 0.8)],
        )];
        for _ in 0..3 {
            let v = d.observe(&rows, &accounts);
            assert_eq!(
                v.to_string(),
                "measured: no noisy neighbour: no cgroup waited behind others for half its \
                 request time (the most: /victim on loop0, 20%)"
            );
        }
        assert_eq!(d.culprit(), None);
    }

    #[test]
    fn several_culprits_name_the_longest_and_the_sum() {
        let a = account(
            "/victim",
            vec![
                (behind("/hog"), 0.4),
                (behind("other cgroups"), 0.3),
                (Part::Service, 0.3),
            ],
        );
        let (v, subject) = measured(&[a]);
        assert_eq!(
            v.text,
            "noisy neighbour on loop0: /victim waited behind /hog for 40% of its request \
             time (70% behind others in all)"
        );
        assert_eq!(subject.unwrap().2, "/hog");
        let a = account(
            "/victim",
            vec![(behind("other cgroups"), 0.9), (Part::Service, 0.1)],
        );
        assert!(measured(&[a])
            .0
            .text
            .contains("behind other cgroups for 90%"));
    }

    #[test]
    fn a_victim_held_by_its_own_limits_is_said_so() {
        let a = account("/a", vec![(Part::OwnLimits, 3.0), (Part::Service, 1.0)]);
        let (v, _) = measured(&[a]);
        assert_eq!(
            (v.finding, v.to_string().as_str()),
            (
                Finding::OwnLimits,
                "measured: held by its own limits: /a on loop0, 75% of its request time"
            )
        );
    }
}
