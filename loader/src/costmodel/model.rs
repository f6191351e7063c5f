//! io.cost.model's six parameters (the type is the snapshot's
//! `LinearModel`, one for every layer): the kernel's defaults, parsing from
//! `--cost-model` and from the kernel's file, and the coefficients the
//! kernel derives from them.

pub use iowarden_exporters::LinearModel;

use super::charge::calc_lcoefs;

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

/// `--cost-model`'s `key=value` pairs: keys not given keep their value in
/// `base`; `ctrl=` and `model=linear` are skipped; unknown keys, a token
/// that is not key=value, an empty model and a `MAJ:MIN` (the flag applies
/// to every traced device) are refused.
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
    parse(base, s, true)
}

/// A line of io.cost.model (`MAJ:MIN key=value...`): keys newer kernels may
/// add are ignored, anything else that is not key=value refused.
pub fn parse_kernel_line(s: &str) -> Result<LinearModel, String> {
    let rest = match s.split_whitespace().next() {
        Some(dev) if is_devnum(dev) => s.trim_start()[dev.len()..].to_string(),
        _ => s.to_string(),
    };
    parse(LinearModel::default(), &rest, false)
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
                let Some(i) = LinearModel::KEYS.iter().position(|&n| n == k) else {
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

/// The coefficients blk-iocost.c's ioc_refresh_lcoefs derives from `m`, in
/// its LCOEF order (rpage, rseqio, rrandio, wpage, wseqio, wrandio), vtime
/// units: what the BPF side charges.
pub fn lcoefs(m: &LinearModel) -> [u64; 6] {
    let r = calc_lcoefs(m.rbps, m.rseqiops, m.rrandiops);
    let w = calc_lcoefs(m.wbps, m.wseqiops, m.wrandiops);
    [r.0, r.1, r.2, w.0, w.1, w.2]
}
