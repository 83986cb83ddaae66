//! A bucket's wire (part of [`super`], the executor): the shape of a compression unit,
//! the wire capacities a layout declares, and how units' wires are appended into one
//! bucket wire and taken apart again after the exchange (gathered pieces, ring merge).

use super::super::TensorSpec;
use crate::compress::{Received, Wire, WireLen};
use crate::error::{Error, Result};
use crate::schedule::Bucket;

/// Shape of compression unit `u`: the tensor itself, or (merged compression) the
/// bucket `u` packed into one `1 x n` tensor.
pub(crate) fn unit_shape(
    tensors: &[TensorSpec],
    plans: &[Vec<Bucket>],
    merge: bool,
    u: usize,
) -> (usize, usize) {
    if merge {
        (
            1,
            plans[0][u]
                .tensors
                .iter()
                .map(|&t| tensors[t].numel())
                .sum(),
        )
    } else {
        (tensors[u].rows, tensors[u].cols)
    }
}

/// Wire sizes of a layout: the largest unit wire, whether the gather section (and its
/// trailer of lengths) is used, every bucket's declared wire per phase and round, and
/// the largest bucket wire.
pub(crate) struct Capacities {
    pub(crate) unit_cap: WireLen,
    pub(crate) gather_used: bool,
    pub(crate) bucket_wires: Vec<Vec<Vec<WireLen>>>,
    pub(crate) bucket_cap: WireLen,
}

/// The [`Capacities`] of `plans` for compressor `comp` with `rounds` rounds.
pub(crate) fn capacities(
    comp: &dyn crate::compress::Compressor,
    plans: &[Vec<Bucket>],
    rounds: usize,
) -> Capacities {
    let all_units: Vec<usize> = plans
        .iter()
        .flatten()
        .flat_map(|b| b.units.iter().copied())
        .collect();
    // Capacities: one unit wire (largest tensor), one bucket wire (largest bucket).
    let unit_cap = all_units
        .iter()
        .flat_map(|&t| (0..rounds).map(move |r| (t, r)))
        .map(|(t, r)| comp.wire_capacity(t, r))
        .fold(WireLen::default(), WireLen::max);
    // Methods without a gather section send no trailer either.
    let gather_used = unit_cap.gather_u32 > 0;
    // Declared wire of every bucket per phase and round: its tensors' wires plus the
    // trailer of their gathered lengths (exact when every tensor's section is).
    let bucket_wires: Vec<Vec<Vec<WireLen>>> = plans
        .iter()
        .map(|plan| {
            plan.iter()
                .map(|b| {
                    (0..rounds)
                        .map(|r| {
                            let trailer = WireLen {
                                gather_u32: if gather_used { b.units.len() } else { 0 },
                                gather_exact: true,
                                ..WireLen::default()
                            };
                            b.units
                                .iter()
                                .map(|&t| comp.wire_capacity(t, r))
                                .fold(trailer, WireLen::plus)
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let bucket_cap = bucket_wires
        .iter()
        .flatten()
        .flatten()
        .fold(WireLen::default(), |a, &b| a.max(b));
    Capacities {
        unit_cap,
        gather_used,
        bucket_wires,
        bucket_cap,
    }
}

/// Where one tensor's wire sits inside its bucket's wire.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UnitLayout {
    sum_off: usize,
    sum_len: usize,
    pub(crate) gather_len: usize,
    ring_off: usize,
    ring_len: usize,
}

/// Append a tensor's wire to the bucket's (within reserved capacity: no allocation).
pub(crate) fn append(bucket: &mut Wire, unit: &Wire) -> UnitLayout {
    let l = UnitLayout {
        sum_off: bucket.sum_f32.len(),
        sum_len: unit.sum_f32.len(),
        gather_len: unit.gather_u32.len(),
        ring_off: bucket.ring_u32.len(),
        ring_len: unit.ring_u32.len(),
    };
    bucket.sum_f32.extend_from_slice(&unit.sum_f32);
    bucket.gather_u32.extend_from_slice(&unit.gather_u32);
    bucket.ring_u32.extend_from_slice(&unit.ring_u32);
    l
}

/// The part of a bucket's exchange that belongs to unit `u` of `units`: slices of the
/// summed and ring sections, and every worker's gathered piece copied into `scratch`
/// (worker w's section ends with `units` lengths, one per unit).
pub(crate) fn unit_received<'a>(
    rec: &Received<'a>,
    l: &UnitLayout,
    u: usize,
    units: usize,
    scratch: &'a mut [u32],
    counts: &'a mut [usize],
) -> Result<Received<'a>> {
    let mut filled = 0usize;
    if !rec.gathered_u32.is_empty() || rec.gather_counts.iter().any(|&c| c > 0) {
        for (w, count) in counts[..rec.world_size].iter_mut().enumerate() {
            let sec = rec.gathered(w);
            if sec.len() < units {
                return Err(Error::Runtime(format!("bucket exchange: worker {w} sent {} words, fewer than its {units}-word trailer", sec.len())));
            }
            let (data, lens) = sec.split_at(sec.len() - units);
            let start: usize = lens[..u].iter().map(|&x| x as usize).sum();
            let len = lens[u] as usize;
            if start + len > data.len() || filled + len > scratch.len() {
                return Err(Error::Runtime(format!(
                    "bucket exchange: worker {w}'s trailer is inconsistent with its data"
                )));
            }
            scratch[filled..filled + len].copy_from_slice(&data[start..start + len]);
            *count = len;
            filled += len;
        }
    } else {
        counts.iter_mut().for_each(|c| *c = 0);
    }
    let gathered: &'a [u32] = &scratch[..filled];
    Ok(Received {
        sum_f32: &rec.sum_f32[l.sum_off..l.sum_off + l.sum_len],
        gathered_u32: gathered,
        gather_counts: counts,
        ring_u32: &rec.ring_u32[l.ring_off..l.ring_off + l.ring_len],
        world_size: rec.world_size,
    })
}

/// Ring merge of a chunk of a bucket's concatenated ring section: each tensor's part of
/// the chunk goes to that tensor's `ring_merge` with its own offset.
pub(crate) fn merge_units(
    comp: &mut dyn crate::compress::Compressor,
    units: &[usize],
    layout: &[UnitLayout],
    aggregated: usize,
    off: usize,
    incoming: &[u32],
    own: &mut [u32],
) -> Result<()> {
    let end = off + own.len();
    for (&t, l) in units.iter().zip(layout) {
        let (a, b) = (off.max(l.ring_off), end.min(l.ring_off + l.ring_len));
        if a < b {
            comp.ring_merge(
                t,
                aggregated,
                a - l.ring_off,
                &incoming[a - off..b - off],
                &mut own[a - off..b - off],
            )?;
        }
    }
    Ok(())
}
