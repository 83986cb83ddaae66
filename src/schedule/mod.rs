//! The iteration schedule, shared by the e2e engine (real clock, src/engine/) and the
//! simulator (virtual clock, src/sim/): which gradients travel together ([`plan`],
//! [`planner`]), the buckets they form ([`Bucket`]), and one iteration as the list of
//! operations a rank's communication thread runs ([`Op`], [`iteration`]). Pure: no
//! clock, no MPI. Both executors walk the same list, so a change to the schedule is
//! made once (docs/architecture.md, "The e2e iteration").

pub mod plan;
pub mod planner;

/// One bucket of a fusion plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Model tensors (registration indices) in backward order.
    pub tensors: Vec<usize>,
    /// Compression units (compressor tensor ids): the tensors themselves, or one merged
    /// unit (id = bucket index) when the bucket is compressed as a whole.
    pub units: Vec<usize>,
    /// Highest backward position in the bucket + 1: the bucket is complete once this many
    /// gradients are ready.
    pub ready_after: usize,
}

/// The buckets of `groups` (lists of backward positions) over `m` tensors: backward
/// position `p` is tensor `m - 1 - p` (backward runs in reverse registration order). With
/// `merge`, each bucket is one compression unit whose id is the bucket's index.
pub fn buckets(groups: &[Vec<usize>], m: usize, merge: bool) -> Vec<Bucket> {
    groups
        .iter()
        .enumerate()
        .map(|(bi, pos)| {
            let tensors: Vec<usize> = pos.iter().map(|&p| m - 1 - p).collect();
            Bucket {
                ready_after: pos.iter().max().map_or(0, |p| p + 1),
                units: if merge { vec![bi] } else { tensors.clone() },
                tensors,
            }
        })
        .collect()
}

/// One operation of an iteration, in the order one rank's communication thread runs it.
/// `slot` is a unit's place in its bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Wait until the bucket's gradients are ready: its last one with pipelining, the
    /// whole backward without.
    Wait { bucket: usize, ready: usize },
    /// Merged compression, round 0: pack the bucket's gradients into one tensor.
    Pack { bucket: usize },
    /// Compress (and feedback) one unit for a round and append its wire to the bucket's
    /// (the first slot of a round starts an empty bucket wire).
    Compress {
        bucket: usize,
        slot: usize,
        round: usize,
    },
    /// Append the trailer of gathered lengths (methods with a gather section) and
    /// exchange the bucket's wire by its [`crate::comm::exchange::ExchangePlan`].
    Exchange { bucket: usize, round: usize },
    /// Split one unit's part out of the received data and decompress it.
    Decompress {
        bucket: usize,
        slot: usize,
        round: usize,
    },
    /// Merged compression, after the last round: copy the merged result back into the
    /// bucket's tensors.
    Unpack { bucket: usize },
}

/// One iteration of `buckets` (one phase of the method's step cycle) over `m` tensors:
/// per bucket, wait for its gradients, then per round (merged, round 0: pack first)
/// compress every unit, exchange, decompress every unit (merged: then unpack). A round starts after the
/// previous round's exchange (Power-SGD's Q needs P's sum). Collectives run in bucket
/// order on one thread, like one NCCL stream.
pub fn iteration(
    buckets: &[Bucket],
    rounds: usize,
    merge: bool,
    pipelining: bool,
    m: usize,
) -> Vec<Op> {
    let mut ops = Vec::new();
    for (bi, b) in buckets.iter().enumerate() {
        let ready = if pipelining { b.ready_after } else { m };
        ops.push(Op::Wait { bucket: bi, ready });
        for round in 0..rounds {
            if merge && round == 0 {
                ops.push(Op::Pack { bucket: bi });
            }
            for slot in 0..b.units.len() {
                ops.push(Op::Compress {
                    bucket: bi,
                    slot,
                    round,
                });
            }
            ops.push(Op::Exchange { bucket: bi, round });
            for slot in 0..b.units.len() {
                ops.push(Op::Decompress {
                    bucket: bi,
                    slot,
                    round,
                });
            }
        }
        if merge {
            ops.push(Op::Unpack { bucket: bi });
        }
    }
    ops
}

/// An executed operation with the wire it carried: for [`Op::Exchange`], the bucket's
/// wire (sections in words, trailer included); for [`Op::Compress`], the unit's;
/// otherwise empty. The engine records what it sent, the simulator what it priced, so a
/// test can check the two ran the same schedule with the same messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Executed {
    pub op: Op,
    pub wire: crate::compress::WireLen,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_map_backward_positions_to_tensors() {
        let b = buckets(&[vec![0, 1], vec![2]], 3, false);
        assert_eq!(b[0].tensors, vec![2, 1]);
        assert_eq!(b[0].units, vec![2, 1]);
        assert_eq!(b[0].ready_after, 2);
        assert_eq!(b[1].tensors, vec![0]);
        let merged = buckets(&[vec![0, 1], vec![2]], 3, true);
        assert_eq!(merged[1].units, vec![1]);
    }

    #[test]
    fn an_iteration_waits_packs_compresses_exchanges_and_decompresses_in_order() {
        let b = buckets(&[vec![0, 1], vec![2]], 3, false);
        let ops = iteration(&b, 2, false, true, 3);
        // Per bucket: wait, then per round: 2 compress (1 for the second), exchange, decompress.
        assert_eq!(ops.len(), (1 + 2 * (2 + 1 + 2)) + (1 + 2 * (1 + 1 + 1)));
        assert_eq!(
            ops[0],
            Op::Wait {
                bucket: 0,
                ready: 2
            }
        );
        assert_eq!(
            ops[3],
            Op::Exchange {
                bucket: 0,
                round: 0
            }
        );
        let merged = buckets(&[vec![0, 1], vec![2]], 3, true);
        let unpiped = iteration(&merged, 1, true, false, 3);
        assert_eq!(
            unpiped[0],
            Op::Wait {
                bucket: 0,
                ready: 3
            }
        );
        assert_eq!(unpiped[1], Op::Pack { bucket: 0 });
        assert_eq!(unpiped[5], Op::Unpack { bucket: 0 });
    }
}
