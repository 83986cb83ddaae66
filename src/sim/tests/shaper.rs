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
