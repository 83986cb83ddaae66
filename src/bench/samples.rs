//! The raw per-rank series of a case to rank 0, for samples.csv
//! ([`crate::record::samples`]). Called after a case, outside every timed region: the
//! gather allocates and communicates.

use crate::comm::{mpi_count, World};
use crate::error::{Error, Result};
use crate::record::samples::{RankSeries, SamplesSink};

/// Every rank's `local` series on rank 0 (`Some`, in rank order; `None` elsewhere). Every
/// rank calls it, with the same column names. One all-gather of the lengths, then one
/// gather-v of the values.
pub fn gather_to_root(world: &World, local: &RankSeries) -> Result<Option<Vec<RankSeries>>> {
    let names = local.names();
    let flat = local.flat();
    let lens = world.all_gather_u64(flat.len() as u64);
    let total: u64 = lens.iter().sum();
    // Every rank knows the lengths, so every rank refuses alike (no rank left in a gather).
    let total_usize = usize::try_from(total).map_err(|_| too_many(total))?;
    mpi_count(total_usize, "samples gather").map_err(|_| too_many(total))?;
    if total == 0 {
        return Ok(world
            .is_root()
            .then(|| vec![RankSeries::default(); world.size]));
    }
    if !world.is_root() {
        world.gather_v_to(0, &flat, &mut [], &[], &[]);
        return Ok(None);
    }
    let counts: Vec<i32> = lens.iter().map(|&n| n as i32).collect();
    let displs: Vec<i32> = lens
        .iter()
        .scan(0i32, |at, &n| {
            let d = *at;
            *at += n as i32;
            Some(d)
        })
        .collect();
    let mut all = vec![0f64; total_usize];
    world.gather_v_to(0, &flat, &mut all, &counts, &displs);
    let mut out = Vec::with_capacity(world.size);
    for (d, n) in displs.iter().zip(&lens) {
        let part = &all[*d as usize..*d as usize + *n as usize];
        out.push(RankSeries::from_flat(&names, part)?);
    }
    Ok(Some(out))
}

fn too_many(total: u64) -> Error {
    Error::Runtime(format!(
        "samples.csv: {total} values in one case exceed one MPI gather; run with --no-samples or fewer iterations"
    ))
}

/// Gather `local` to rank 0 and write the case's rows there. Every rank calls it (when
/// samples are on); `sink` is rank 0's.
pub fn record_case(
    world: &World,
    sink: Option<&mut SamplesSink>,
    run_id: &str,
    case_id: &str,
    kind: &str,
    local: &RankSeries,
) -> Result<()> {
    let all = gather_to_root(world, local)?;
    if let (Some(all), Some(sink)) = (all, sink) {
        sink.write_case(run_id, case_id, kind, &all)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_series_reaches_rank_0_in_rank_order() {
        let got = crate::comm::loopback::run(3, |world| {
            let r = world.rank as f64;
            let mut s = RankSeries::default();
            s.push("compress_s", &[r, r + 0.5]);
            s.push("total_s", &[10.0 * r, 10.0 * r + 1.0]);
            gather_to_root(&world, &s).unwrap()
        });
        assert!(got[1].is_none() && got[2].is_none());
        let all = got[0].as_ref().unwrap();
        assert_eq!(all.len(), 3);
        for (r, s) in all.iter().enumerate() {
            let r = r as f64;
            assert_eq!(s.names(), ["compress_s", "total_s"]);
            assert_eq!(s.columns[0].1, [r, r + 0.5]);
            assert_eq!(s.columns[1].1, [10.0 * r, 10.0 * r + 1.0]);
        }
    }
}
