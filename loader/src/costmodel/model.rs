//! The io.cost.model line: its six parameters, the kernel's defaults, and
//! parsing from `--cost-model` and from the kernel's file.

use std::fmt;

use iowarden_exporters::CostParams;

use super::calc_lcoefs;

/// The six parameters of an io.cost.model line (0 = that term is free, as
/// in the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinearModel {
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

/// blk-iocost.c autop[AUTOP_HDD]: what the kernel assumes for a rotational disk.
pub const AUTOP_HDD: LinearModel = LinearModel {
    rbps: 174019176,
    rseqiops: 41708,
    rrandiops: 370,
    wbps: 178075866,
    wseqiops: 42705,
    wrandiops: 378,
};

/// blk-iocost.c autop[AUTOP_SSD_DFL]: its starting point for other devices.
pub const AUTOP_SSD_DFL: LinearModel = LinearModel {
    rbps: 488636629,
    rseqiops: 8932,
    rrandiops: 8518,
    wbps: 427891549,
    wseqiops: 28755,
    wrandiops: 21940,
};

/// The model of devices without their own: `--cost-model`, else the SSD default.
pub fn default_model(flag: Option<LinearModel>) -> LinearModel {
    flag.unwrap_or(AUTOP_SSD_DFL)
}

/// A device number, `MAJ:MIN`.
fn is_devnum(tok: &str) -> bool {
    tok.split_once(':').is_some_and(|(a, b)| {
        [a, b]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
    })
}

/// The six parameters, in the order the kernel prints them.
use crate::knobs::cost_model::COEFS as KEYS;

impl LinearModel {
    /// The six parameters in the kernel's order (as KEYS).
    pub fn values(&self) -> [u64; 6] {
        [
            self.rbps,
            self.rseqiops,
            self.rrandiops,
            self.wbps,
            self.wseqiops,
            self.wrandiops,
        ]
    }

    /// The inverse of `values`.
    pub fn from_values(v: [u64; 6]) -> LinearModel {
        LinearModel {
            rbps: v[0],
            rseqiops: v[1],
            rrandiops: v[2],
            wbps: v[3],
            wseqiops: v[4],
            wrandiops: v[5],
        }
    }

    /// `--cost-model`'s `key=value` pairs: keys not given keep their value
    /// in `base`; `ctrl=` and `model=linear` are skipped; unknown keys, a
    /// token that is not key=value, an empty model and a `MAJ:MIN` (the
    /// flag applies to every traced device) are refused.
    pub fn parse_over(base: LinearModel, s: &str) -> Result<LinearModel, String> {
        if s.trim().is_empty() {
            return Err(
                "cost model is empty: give key=value pairs, e.g. 'rbps=2000000000 rrandiops=400000'"
                    .into(),
            );
        }
        if let Some(dev) = s.split_whitespace().next().filter(|t| is_devnum(t)) {
            return Err(format!(
                "cost model: '{dev}': --cost-model applies to every traced device and takes no MAJ:MIN (use --device to trace one device)"
            ));
        }
        Self::parse(base, s, true)
    }

    /// A line of io.cost.model (`MAJ:MIN key=value...`): keys newer kernels
    /// may add are ignored, anything else that is not key=value refused.
    pub fn parse_kernel_line(s: &str) -> Result<LinearModel, String> {
        let rest = match s.split_whitespace().next() {
            Some(dev) if is_devnum(dev) => s.trim_start()[dev.len()..].to_string(),
            _ => s.to_string(),
        };
        Self::parse(LinearModel::default(), &rest, false)
    }

    fn parse(base: LinearModel, s: &str, strict: bool) -> Result<LinearModel, String> {
        let mut v = base.values();
        for tok in s.split_whitespace() {
            let Some((k, val)) = tok.split_once('=') else {
                return Err(format!("cost model: '{tok}' is not key=value"));
            };
            match k {
                "ctrl" => {}
                "model" if val == "linear" => {}
                "model" => return Err(format!("cost model: model={val} (only linear)")),
                _ => {
                    let Some(i) = KEYS.iter().position(|&n| n == k) else {
                        if strict {
                            return Err(format!("cost model: unknown key '{k}'"));
                        }
                        continue;
                    };
                    v[i] = val
                        .parse()
                        .map_err(|_| format!("cost model: {k}={val} is not a number"))?;
                }
            }
        }
        Ok(LinearModel::from_values(v))
    }

    /// The coefficients blk-iocost.c's ioc_refresh_lcoefs derives, in its
    /// LCOEF order (rpage, rseqio, rrandio, wpage, wseqio, wrandio), vtime
    /// units: what the BPF side charges.
    pub fn lcoefs(&self) -> [u64; 6] {
        let r = calc_lcoefs(self.rbps, self.rseqiops, self.rrandiops);
        let w = calc_lcoefs(self.wbps, self.wseqiops, self.wrandiops);
        [r.0, r.1, r.2, w.0, w.1, w.2]
    }

    /// The model's parameters as `io.cost.model` writes them.
    pub fn line(&self, devnum: &str) -> String {
        let kv: Vec<String> = KEYS
            .iter()
            .zip(self.values())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{devnum} ctrl=user model=linear {}", kv.join(" "))
    }
}

impl fmt::Display for LinearModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in KEYS.iter().zip(self.values()).enumerate() {
            write!(f, "{}{k}={v}", if i > 0 { " " } else { "" })?;
        }
        Ok(())
    }
}

/// The same six parameters as the snapshot reports them (metrics, JSON).
impl From<LinearModel> for CostParams {
    fn from(m: LinearModel) -> CostParams {
        CostParams {
            rbps: m.rbps,
            rseqiops: m.rseqiops,
            rrandiops: m.rrandiops,
            wbps: m.wbps,
            wseqiops: m.wseqiops,
            wrandiops: m.wrandiops,
        }
    }
}
