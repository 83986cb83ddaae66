//! The links' token-bucket credit (credit.rs) on the iteration's clock.

use super::*;
use crate::sim::credit::Shaper;

/// [`tiny_costs`] without CPU work: the exchanges run back to back after backward.
fn network_only(shaper: Option<Shaper>) -> CostModel {
    let mut c = tiny_costs();
    c.methods.insert("ssgd".into(), MethodCosts::default());
    c.pack_fixed_s = 0.0;
    c.shaper = shaper;
    c
}

/// The link rate of [`Lin`] in [`tiny_costs`]: 1e-4 s per byte.
fn shaper(burst_bytes: f64) -> Shaper {
    Shaper {
        dilation: 1,
        rate_bytes_per_s: 1e4,
        burst_bytes,
    }
}

#[test]
fn the_credit_of_an_idle_link_saves_its_bytes_once_per_iteration() {
    let case = tiny_ssgd(false);
    let plain = simulate(&case, &network_only(None)).unwrap();
    // Forward and backward idle the link 1.6 s, far past the 0.1 s a 1000-byte bucket
    // needs: the first exchange (tensor c, 1200 B, 0.13 s) rides 1000 B on credit and
    // saves 0.1 s; the others start with an empty bucket.
    let shaped = simulate(&case, &network_only(Some(shaper(1000.0)))).unwrap();
    assert!(
        close(plain.iter_s - shaped.iter_s, 0.1),
        "{} {}",
        plain.iter_s,
        shaped.iter_s
    );
    assert!(close(plain.comm_s - shaped.comm_s, 0.1));
    // A bucket holding every byte: each exchange costs its 4-byte floor (0.0104 s).
    let all = simulate(&case, &network_only(Some(shaper(1e9)))).unwrap();
    assert!(close(all.comm_s, 3.0 * (0.01 + 4e-4)), "{}", all.comm_s);
    // A 1-byte bucket changes nothing worth a byte of link time.
    let none = simulate(&case, &network_only(Some(shaper(1.0)))).unwrap();
    assert!((plain.iter_s - none.iter_s).abs() <= 1e-4 + 1e-12);
}

#[test]
fn the_credit_at_an_iteration_start_is_the_steady_state_refill() {
    // Forward and backward take 0.04 s and the exchanges run back to back after them up
    // to the iteration's end, so in steady state the bucket holds only the 0.04 s of
    // refill (400 B) when the first exchange starts: 0.04 s saved, not the 0.1 s a full
    // 1000 B bucket (a cold start) would give.
    let mut case = tiny_ssgd(false);
    case.workload.fwd_s = 0.01;
    case.workload.bwd_s = vec![0.01; 3];
    let plain = simulate(&case, &network_only(None)).unwrap();
    let shaped = simulate(&case, &network_only(Some(shaper(1000.0)))).unwrap();
    assert!(
        close(plain.iter_s - shaped.iter_s, 0.04),
        "{} {}",
        plain.iter_s,
        shaped.iter_s
    );
    // With pipelining the link idles between the gradients too: never slower, never
    // faster than every exchange at its floor.
    let mut case = tiny_ssgd(true);
    case.workload.fwd_s = 0.01;
    let plain = simulate(&case, &network_only(None)).unwrap();
    for burst in [10.0, 100.0, 500.0, 1000.0, 5000.0] {
        let shaped = simulate(&case, &network_only(Some(shaper(burst)))).unwrap();
        assert!(
            shaped.iter_s <= plain.iter_s + 1e-12 && shaped.comm_s >= 3.0 * 0.0104 - 1e-12,
            "burst {burst}: {} vs {}",
            shaped.iter_s,
            plain.iter_s
        );
    }
}

/// [`Lin`] with a reduction of `gamma_s_per_byte` (the local sum after an all-gather).
struct LinReduce {
    a: f64,
    b: f64,
    gamma_s_per_byte: f64,
}

impl CollectiveCost for LinReduce {
    fn time_s(&self, op: Op, n: usize, m: f64) -> f64 {
        Lin {
            a: self.a,
            b: self.b,
        }
        .time_s(op, n, m)
    }
    fn reduce_s(&self, bytes: f64) -> f64 {
        self.gamma_s_per_byte * bytes
    }
    fn describe(&self) -> String {
        "lin-reduce".into()
    }
    fn with_gamma(&self, gamma_s_per_byte: f64) -> Box<dyn CollectiveCost> {
        Box::new(LinReduce {
            a: self.a,
            b: self.b,
            gamma_s_per_byte,
        })
    }
}

/// On a shaped link an exchange still pays its local work after the collective: S-SGD by
/// MPI_Allgather sums the gathered pieces (`local_s`, (n - 1) x 4 B an element at
/// 1 us a byte). With a bucket of 1 byte at 1 TB/s (credit worth 1e-12 s) the iteration
/// is the unshaped one, local sums included: 4 workers, `tiny`'s 600 elements, 7.2 ms of
/// sums.
#[test]
fn a_shaped_exchange_pays_its_local_sum() {
    let case = SimCase::new(
        tiny(),
        "ssgd",
        Fusion::None,
        false,
        CollectiveMode::AllGather,
        4,
        MethodParams::default(),
    );
    let costs = |shaper: Option<Shaper>| {
        let mut c = network_only(shaper);
        c.network = Box::new(LinReduce {
            a: 0.01,
            b: 1e-4,
            gamma_s_per_byte: 1e-6,
        });
        c
    };
    let plain = simulate(&case, &costs(None)).unwrap();
    let no_sums = simulate(&case, &network_only(None)).unwrap();
    assert!(close(
        plain.comm_s - no_sums.comm_s,
        3.0 * 4.0 * 600.0 * 1e-6
    ));
    let tiny_burst = Shaper {
        dilation: 1,
        rate_bytes_per_s: 1e12,
        burst_bytes: 1.0,
    };
    let shaped = simulate(&case, &costs(Some(tiny_burst))).unwrap();
    assert!(
        close(shaped.iter_s, plain.iter_s) && close(shaped.comm_s, plain.comm_s),
        "{} vs {}",
        shaped.comm_s,
        plain.comm_s
    );
}

/// The credit refills from the iteration's start to its exchange's start, after the
/// bucket's sync (clock.rs `exchange`: `clock + sync`). S-SGD on `tiny` in one bucket
/// (2,400 B), forward and backward 0.04 s, a sync of 0.02 s, a 1,000 B bucket: in steady
/// state the exchange ends with the bucket empty, so the next iteration starts empty and
/// the exchange at 0.06 s rides the 600 B refilled: 0.25 - 0.06 = 0.19 s instead of the
/// unshaped 0.01 + 2,400 x 1e-4 = 0.25 s. Iteration 0.25 s, communication 0.21 s.
#[test]
fn the_credit_refills_until_the_exchange_starts_after_its_sync() {
    let mut case = SimCase::new(
        tiny(),
        "ssgd",
        Fusion::Bytes(1 << 30),
        false,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    );
    case.workload.fwd_s = 0.01;
    case.workload.bwd_s = vec![0.01; 3];
    let mut costs = network_only(Some(shaper(1000.0)));
    costs.host.sync_s = 0.02;
    let r = simulate(&case, &costs).unwrap();
    assert!(close(r.iter_s, 0.25), "{r:?}");
    assert!(close(r.comm_s, 0.21), "{r:?}");
}
