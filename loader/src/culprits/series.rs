//! One series on one device in the replay: its requests in flight and
//! queued now, and what it was charged as a victim since the last flush.
//!
//! The device's integrals, advanced at every event (replay.rs): Ψ = ∫ 1/N
//! over the time N > 0 requests are in flight, and for each op Φ_o = ∫ N_o
//! / N (the device time the op's requests held) and Ω_o = ∫ [N = 0] over
//! the time the last series issued was of that op (the scheduler kept the
//! device for it). A series C's own Φ_C = ∫ n_C / N is kept lazily (its
//! count is constant between its own events). A victim with n requests in
//! flight and q queued over a span is charged, by processor sharing: n ΔΨ
//! its service, n (n - 1) ΔΨ behind its own, n ΔΦ_C behind C on the
//! device, and q (ΔΦ_C + ΔΩ_C) behind C in the scheduler (q n ΔΨ behind
//! its own; its own ΔΩ is the scheduler's own time, left unsplit). Its
//! counts change only at its own events, so the charges are settled there
//! (and at each flush) from the integrals' values at its last settle.

use iowarden_exporters::Op;

/// Series named apart per device: the busiest by device time; the others'
/// part is told by op (`Other`), so a victim's time still tiles.
pub const NAMED: usize = 16;
pub const OPS: usize = 4;
/// Index of the device stage and the queue stage in a charge pair.
pub const DEVICE: usize = 0;
pub const QUEUE: usize = 1;

pub fn op_index(op: Op) -> usize {
    Op::ALL.iter().position(|&o| o == op).unwrap_or(0)
}

/// The device's integrals (see the module's doc), at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Integrals {
    pub psi: f64,
    pub phi_op: [f64; OPS],
    pub omega_op: [f64; OPS],
}

/// A named culprit's Φ and Ω at one instant, its op, its position among
/// the named and its index among the device's series.
#[derive(Clone, Copy, Debug, Default)]
pub struct NamedNow {
    pub phi: f64,
    pub omega: f64,
    pub op: usize,
    pub pos: usize,
    pub index: usize,
}

/// The named culprits at one instant: the positions held, in order.
#[derive(Clone, Copy, Debug, Default)]
pub struct NamedSet {
    held: [NamedNow; NAMED],
    len: usize,
}

impl NamedSet {
    pub fn push(&mut self, x: NamedNow) {
        self.held[self.len] = x;
        self.len += 1;
    }

    pub fn held(&self) -> &[NamedNow] {
        &self.held[..self.len]
    }

    pub fn held_mut(&mut self) -> &mut [NamedNow] {
        &mut self.held[..self.len]
    }
}

/// What a victim series was charged since the last flush, in ns times
/// requests, [device, queue] each.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Charges {
    pub service: f64,
    pub own: [f64; 2],
    pub named: [[f64; 2]; NAMED],
    pub other: [[f64; 2]; OPS],
}

/// The integrals at the series' last settle: what it owes is charged
/// from their change since.
#[derive(Clone, Debug, Default)]
struct Mark {
    at: Integrals,
    omega_self: f64,
    named_phi: [f64; NAMED],
    named_omega: [f64; NAMED],
}

#[derive(Clone, Debug)]
pub struct Series {
    pub slot: u32,
    pub op: usize,
    /// Requests in flight and queued in the scheduler now.
    pub in_flight: u32,
    pub queued: u32,
    /// Φ of its own at `psi_mark` (its count is constant since).
    phi_base: f64,
    psi_mark: f64,
    /// Ω of its own: time with nothing in flight after its issue.
    pub omega: f64,
    /// Its last event (ns).
    pub last_event: u64,
    /// Its device time share, decayed (which series are named).
    pub score: f64,
    phi_at_score: f64,
    mark: Mark,
    pub charged: Charges,
}

impl Series {
    /// A series first seen now: it owes nothing before.
    pub fn new(slot: u32, op: usize, now: &Integrals, named: &NamedSet) -> Series {
        let mut s = Series {
            slot,
            op,
            in_flight: 0,
            queued: 0,
            phi_base: 0.0,
            psi_mark: now.psi,
            omega: 0.0,
            last_event: 0,
            score: 0.0,
            phi_at_score: 0.0,
            mark: Mark::default(),
            charged: Charges::default(),
        };
        s.mark_now(now, named);
        s
    }

    /// Its Φ when the device's Ψ is `psi`.
    pub fn phi(&self, psi: f64) -> f64 {
        self.phi_base + self.in_flight as f64 * (psi - self.psi_mark)
    }

    /// Before its count changes: Φ so far becomes the base.
    pub fn rebase(&mut self, psi: f64) {
        self.phi_base = self.phi(psi);
        self.psi_mark = psi;
    }

    /// Charges what it owes since its last settle, as victim, and marks
    /// the integrals' values now.
    pub fn settle(&mut self, now: &Integrals, named: &NamedSet, me: usize) {
        if self.in_flight > 0 || self.queued > 0 {
            self.charge(now, named, me);
        }
        self.mark_now(now, named);
    }

    fn charge(&mut self, now: &Integrals, named: &NamedSet, me: usize) {
        let (n, q) = (self.in_flight as f64, self.queued as f64);
        let m = &self.mark;
        let d_psi = now.psi - m.at.psi;
        // Its own Φ moved by n ΔΨ: its count was n all along.
        let own_phi = n * d_psi;
        let own_omega = self.omega - m.omega_self;
        let c = &mut self.charged;
        c.service += n * d_psi;
        c.own[DEVICE] += n * (own_phi - d_psi);
        c.own[QUEUE] += q * own_phi;
        let mut other = [[0.0; 2]; OPS];
        for (o, part) in other.iter_mut().enumerate() {
            let d_phi = now.phi_op[o] - m.at.phi_op[o];
            let d_omega = now.omega_op[o] - m.at.omega_op[o];
            *part = [n * d_phi, q * (d_phi + d_omega)];
        }
        other[self.op][DEVICE] -= n * own_phi;
        other[self.op][QUEUE] -= q * (own_phi + own_omega);
        // The named ones' ΔΦ and ΔΦ + ΔΩ by op, summed in registers (a
        // mask per op, not an index: an index chains every step through
        // memory), taken from their ops' below.
        let mut named_by_op = [[0.0; 2]; OPS];
        for x in named.held().iter().filter(|x| x.index != me) {
            let d_phi = x.phi - m.named_phi[x.pos];
            let d_omega = x.omega - m.named_omega[x.pos];
            let d = [d_phi, d_phi + d_omega];
            c.named[x.pos][DEVICE] += n * d[0];
            c.named[x.pos][QUEUE] += q * d[1];
            for (o, sum) in named_by_op.iter_mut().enumerate() {
                let mask = f64::from(u8::from(x.op == o));
                sum[0] += mask * d[0];
                sum[1] += mask * d[1];
            }
        }
        for (part, sum) in other.iter_mut().zip(named_by_op) {
            part[DEVICE] -= n * sum[0];
            part[QUEUE] -= q * sum[1];
        }
        for (o, part) in other.iter().enumerate() {
            for st in [DEVICE, QUEUE] {
                // What the named ones left of their op: rounding aside, >= 0.
                c.other[o][st] += part[st].max(0.0);
            }
        }
    }

    /// Marks the integrals now. An empty position's mark stays 0, as an
    /// empty position's values are (a series named on first sight has Φ
    /// and Ω 0; a vacated position's marks are zeroed).
    fn mark_now(&mut self, now: &Integrals, named: &NamedSet) {
        self.mark.at = *now;
        self.mark.omega_self = self.omega;
        for x in named.held() {
            self.mark.named_phi[x.pos] = x.phi;
            self.mark.named_omega[x.pos] = x.omega;
        }
    }

    /// Named position j now holds a series whose Φ and Ω are `phi` and
    /// `omega` (0, 0: none); settled just before, it owes nothing to the
    /// position's previous holder.
    pub fn mark_named(&mut self, j: usize, phi: f64, omega: f64) {
        self.mark.named_phi[j] = phi;
        self.mark.named_omega[j] = omega;
    }

    /// Its score after `elapsed_ns` more: the device time share it held
    /// since the last time, over a decay of a second's half-life.
    pub fn rescore(&mut self, psi: f64, elapsed_ns: u64) {
        let phi = self.phi(psi);
        let decay = 0.5f64.powf(elapsed_ns as f64 / 1e9);
        self.score = self.score * decay + (phi - self.phi_at_score);
        self.phi_at_score = phi;
    }

    /// Whether it holds nothing (in flight or queued).
    pub fn idle(&self) -> bool {
        self.in_flight == 0 && self.queued == 0
    }
}
