//! A token-bucket shaper's credit on the simulator's clock (part of [`super`]).
//!
//! netlab shapes every node's link with `tc tbf` (scripts/netlab.sh): the bucket fills at
//! the link rate while the link idles, up to `burst` bytes, and bytes on credit leave at
//! memory speed. micro-comm times back-to-back iterations, which spend the credit in the
//! first ones, so the fitted collectives run at the rate; in a training iteration the
//! link idles through forward and backward and the first exchanges ride on the credit
//! (docs/performance.md, "Simulator accuracy over the emulated network"). [`Shaper`]
//! carries the shaping a netlab run recorded (`netlab.txt`), [`Credit`] the bucket through one
//! iteration: an exchange whose link bytes `v` start with credit `c` saves `min(c, v)`
//! bytes of link time, and the steady state of identical iterations sets the credit at
//! an iteration's start (`clock::steady_state` iterates to it).

use super::network::Op;
use super::{Result, SimError};
use std::path::Path;

/// One direction of every node's link, shaped by a token bucket, in the emulated
/// network's units: under time dilation K (`netlab.sh up --dilate K`) tbf shapes to
/// `rate / K` on this machine's clock, which is `rate` on the emulated clock the run's
/// times are in (every time written is wall / K); the burst is bytes, which dilation does
/// not change (it refills in `burst / rate` emulated seconds either way).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shaper {
    pub rate_bytes_per_s: f64,
    pub burst_bytes: f64,
    /// The run's time dilation K (1: none), for the description.
    pub dilation: u32,
}

impl Shaper {
    /// The shaping a netlab run recorded in `dir/netlab.txt` (`rate=1gbit`,
    /// `burst=262144`), `None` when the run was not over netlab. A dilated run's file
    /// (`dilate=4`, `tbf_rate=250mbit`) gives the emulated link's `rate` and the rate tbf
    /// really shaped to; they must agree (`tbf_rate x dilate = rate`): the shaper is the
    /// emulated link's (the undilated equivalent), in the same units as the run's times.
    pub fn from_run_dir(dir: &Path) -> Result<Option<Shaper>> {
        let path = dir.join("netlab.txt");
        let Some(text) = crate::input::read_to_string_if_exists(
            &path,
            crate::input::TEXT_BYTES,
            "the netlab.txt scripts/netlab.sh wrote",
        )
        .map_err(|e| SimError::Input(e.to_string()))?
        else {
            return Ok(None);
        };
        let get = |key: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
                .map(str::trim)
        };
        let bad = |key: &str, v: Option<&str>, want: &str| {
            SimError::Input(format!(
                "{}: key '{key}' = {:?}: expected {want} (scripts/netlab.sh run writes this file; rerun it or delete the file to simulate without the shaper)",
                path.display(),
                v.unwrap_or("<missing>")
            ))
        };
        let rate = get("rate");
        let rate_bps = rate
            .and_then(rate_bits_per_s)
            .ok_or_else(|| bad("rate", rate, "a tc rate such as 1gbit, 100mbit"))?;
        let burst = get("burst");
        let burst_bytes = burst
            .and_then(|b| b.parse::<u64>().ok())
            .filter(|&b| b > 0)
            .ok_or_else(|| bad("burst", burst, "a positive number of bytes"))?;
        let dilate = get("dilate");
        let dilation = match dilate {
            None => 1,
            Some(d) => d
                .parse::<u32>()
                .ok()
                .filter(|k| crate::measure::dilation::Dilation::new(*k).is_ok())
                .ok_or_else(|| {
                    bad(
                        "dilate",
                        dilate,
                        "a time dilation factor (an integer from 1 to 64)",
                    )
                })?,
        };
        if let Some(t) = get("tbf_rate") {
            let agrees = rate_bits_per_s(t)
                .is_some_and(|tbf| (tbf * f64::from(dilation) - rate_bps).abs() <= 1e-4 * rate_bps);
            if !agrees {
                return Err(bad(
                    "tbf_rate",
                    Some(t),
                    &format!(
                        "rate / dilate = {:.6} Mbit/s (rate={}, dilate={dilation})",
                        rate_bps / f64::from(dilation) * 1e-6,
                        rate.unwrap_or("?")
                    ),
                ));
            }
        }
        Ok(Some(Shaper {
            rate_bytes_per_s: rate_bps / 8.0,
            burst_bytes: burst_bytes as f64,
            dilation,
        }))
    }

    pub fn describe(&self) -> String {
        let dilated = if self.dilation > 1 {
            format!(
                " (time dilation {}: tbf shaped to {:.3} Gbit/s on the machine's clock)",
                self.dilation,
                self.rate_bytes_per_s * 8e-9 / f64::from(self.dilation)
            )
        } else {
            String::new()
        };
        format!(
            "tbf {:.3} Gbit/s burst {:.0} B{dilated}",
            self.rate_bytes_per_s * 8e-9,
            self.burst_bytes
        )
    }
}

/// `1gbit` / `100mbit` / `500kbit` / `333333333bit` (tc's units, as netlab.sh writes
/// them) in bit/s.
fn rate_bits_per_s(s: &str) -> Option<f64> {
    let (num, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|&(u, k)| s.strip_suffix(u).map(|n| (n, k)))?;
    let v: f64 = num.parse().ok()?;
    (v > 0.0 && v.is_finite()).then_some(v * scale)
}

/// Bytes one node's link carries (each direction) for one collective of `m` bytes per
/// rank among `n`: the bandwidth-optimal volumes (Thakur et al. 2005, as network.rs):
/// all-reduce and rings `2 (n-1)/n m`, all-gather `(n-1) m`, the parameter server's
/// root `(n-1) m` in and out (gather then broadcast of `n m`: `(n-1) n m`).
pub fn link_bytes(op: Op, n: usize, m: f64) -> f64 {
    let n = n.max(1) as f64;
    match op {
        Op::AllReduce | Op::Ring => 2.0 * (n - 1.0) / n * m,
        Op::AllGather | Op::PsReduceBcast => (n - 1.0) * m,
        Op::PsGatherBcast => (n - 1.0) * n * m,
    }
}

/// The bucket's state while one iteration walks the clock.
#[derive(Clone, Copy, Debug)]
pub struct Credit {
    pub shaper: Shaper,
    /// Credit (bytes) when the link last went idle.
    bytes: f64,
    /// When the link last went idle (clock, s).
    idle_since_s: f64,
}

impl Credit {
    /// The bucket at an iteration's start (clock 0) holding `bytes`.
    pub fn new(shaper: Shaper, bytes: f64) -> Credit {
        Credit {
            shaper,
            bytes: bytes.clamp(0.0, shaper.burst_bytes),
            idle_since_s: 0.0,
        }
    }

    /// Credit at clock `t_s` if the link idled since it last went idle.
    pub fn at(&self, t_s: f64) -> f64 {
        let idle = (t_s - self.idle_since_s).max(0.0);
        (self.bytes + idle * self.shaper.rate_bytes_per_s).min(self.shaper.burst_bytes)
    }

    /// One collective starting at `t_s`, priced `t_fit_s` at the link rate, moving
    /// `v_bytes` over each link: the bytes on credit leave at once, so it saves their
    /// link time, down to `floor_s` (the collective's smallest-message cost). Returns
    /// its time; the link is idle again from its end.
    pub fn exchange(&mut self, t_s: f64, t_fit_s: f64, v_bytes: f64, floor_s: f64) -> f64 {
        let c = self.at(t_s);
        let used = c.min(v_bytes.max(0.0));
        let t = (t_fit_s - used / self.shaper.rate_bytes_per_s).max(floor_s.min(t_fit_s));
        self.bytes = c - used;
        self.idle_since_s = t_s + t;
        t
    }

    /// The link stays busy until `t_s` (an exchange the host slowed past its priced end):
    /// no refill before it.
    pub fn busy_until(&mut self, t_s: f64) {
        self.idle_since_s = self.idle_since_s.max(t_s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gbit() -> Shaper {
        Shaper {
            rate_bytes_per_s: 125e6,
            burst_bytes: 250_000.0,
            dilation: 1,
        }
    }

    #[test]
    fn the_bucket_refills_at_the_rate_up_to_the_burst_and_saves_the_credited_bytes() {
        let mut c = Credit::new(gbit(), 0.0);
        // 1 ms idle: 125 kB of credit.
        assert!((c.at(1e-3) - 125_000.0).abs() < 1e-6);
        assert_eq!(c.at(1.0), 250_000.0);
        // A 1 MB exchange at 8 ms, starting at 10 ms (full bucket): 2 ms saved.
        let t = c.exchange(10e-3, 8e-3, 1e6, 10e-6);
        assert!((t - 6e-3).abs() < 1e-12, "{t}");
        // The link stays busy until 16 ms, then idles: empty at 16 ms.
        assert!(c.at(16e-3).abs() < 1e-6);
        // A small exchange on partial credit costs its floor, and uses only its bytes.
        let t = c.exchange(16.2e-3, 80e-6, 10_000.0, 20e-6);
        assert!((t - 20e-6).abs() < 1e-12, "{t}");
        assert!((c.at(16.22e-3) - 15_000.0).abs() < 1e-3);
        // An exchange slowed past its priced end refills nothing until it ends.
        c.busy_until(20e-3);
        assert!((c.at(20e-3) - 15_000.0).abs() < 1e-3);
        // No credit: the fitted time.
        let mut c = Credit::new(gbit(), 0.0);
        assert_eq!(c.exchange(0.0, 5e-3, 1e6, 1e-5), 5e-3);
    }

    #[test]
    fn link_volumes_follow_the_bandwidth_optimal_algorithms() {
        assert_eq!(link_bytes(Op::AllReduce, 2, 1000.0), 1000.0);
        assert_eq!(link_bytes(Op::Ring, 4, 1000.0), 1500.0);
        assert_eq!(link_bytes(Op::AllGather, 4, 1000.0), 3000.0);
        assert_eq!(link_bytes(Op::AllReduce, 1, 1000.0), 0.0);
    }

    #[test]
    fn netlab_txt_is_read_and_bad_values_name_the_file_and_key() {
        let dir = std::env::temp_dir().join(format!("gc-credit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Shaper::from_run_dir(&dir).unwrap(), None);
        std::fs::write(
            dir.join("netlab.txt"),
            "nodes=2\nrate=1gbit\nburst=262144\nlimit=2000000\n",
        )
        .unwrap();
        let s = Shaper::from_run_dir(&dir).unwrap().unwrap();
        assert_eq!(s.rate_bytes_per_s, 125e6);
        assert_eq!(s.burst_bytes, 262144.0);
        std::fs::write(dir.join("netlab.txt"), "rate=fast\nburst=1\n").unwrap();
        let e = Shaper::from_run_dir(&dir).unwrap_err().to_string();
        assert!(
            e.contains("netlab.txt") && e.contains("'rate'") && e.contains("fast"),
            "{e}"
        );
        std::fs::write(dir.join("netlab.txt"), "rate=1gbit\n").unwrap();
        let e = Shaper::from_run_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("'burst'") && e.contains("<missing>"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A dilated run's netlab.txt (scripts/netlab.sh up 2 --rate 1gbit --dilate 4): the
    /// shaper is the emulated link's, 1 Gbit/s with the same burst in bytes, not the
    /// 250 Mbit/s tbf shaped to on the machine's clock, so the credit is in the run's
    /// (emulated, real-unit) seconds; a file whose tbf rate does not match is refused.
    #[test]
    fn a_dilated_netlab_txt_gives_the_undilated_link() {
        let dir = std::env::temp_dir().join(format!("gc-credit-dil-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("netlab.txt"),
            "nodes=2\nrate=1gbit\nburst=262144\nlimit=2000000\ndilate=4\ntbf_rate=250mbit\n",
        )
        .unwrap();
        let s = Shaper::from_run_dir(&dir).unwrap().unwrap();
        assert_eq!(s.rate_bytes_per_s, 125e6);
        assert_eq!(s.burst_bytes, 262144.0);
        assert_eq!(s.dilation, 4);
        assert!(s.describe().contains("time dilation 4"), "{}", s.describe());
        assert!(s.describe().contains("0.250 Gbit/s"), "{}", s.describe());
        // The credit after an idle spell is the undilated link's: 1 ms of emulated idle
        // refills 125 kB (at 250 Mbit/s it would be 31 kB).
        let c = Credit::new(s, 0.0);
        assert!((c.at(1e-3) - 125_000.0).abs() < 1e-6);
        // K = 3: tbf at the bit rate netlab.sh writes when RATE / K is not whole kbit.
        std::fs::write(
            dir.join("netlab.txt"),
            "rate=1gbit\nburst=262144\ndilate=3\ntbf_rate=333333333bit\n",
        )
        .unwrap();
        assert_eq!(Shaper::from_run_dir(&dir).unwrap().unwrap().dilation, 3);
        // A run before dilation existed reads as K = 1.
        std::fs::write(dir.join("netlab.txt"), "rate=1gbit\nburst=262144\n").unwrap();
        assert_eq!(Shaper::from_run_dir(&dir).unwrap().unwrap().dilation, 1);
        for (bad, key) in [
            (
                "rate=1gbit\nburst=262144\ndilate=4\ntbf_rate=1gbit\n",
                "'tbf_rate'",
            ),
            ("rate=1gbit\nburst=262144\ndilate=0\n", "'dilate'"),
            (
                "rate=1gbit\nburst=262144\ndilate=3\ntbf_rate=2mbit\n",
                "'tbf_rate'",
            ),
            ("rate=1gbit\nburst=262144\ndilate=four\n", "'dilate'"),
        ] {
            std::fs::write(dir.join("netlab.txt"), bad).unwrap();
            let e = Shaper::from_run_dir(&dir).unwrap_err().to_string();
            assert!(e.contains("netlab.txt") && e.contains(key), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The parameter server's volumes (module docs of `link_bytes`): the root's link
    /// carries `(n-1) m` for a reduce-broadcast and `(n-1) n m` for a gather-broadcast;
    /// one rank moves nothing.
    #[test]
    fn ps_link_volumes_by_hand() {
        assert_eq!(link_bytes(Op::PsReduceBcast, 4, 1000.0), 3.0 * 1000.0);
        assert_eq!(link_bytes(Op::PsGatherBcast, 4, 1000.0), 3.0 * 4.0 * 1000.0);
        assert_eq!(link_bytes(Op::PsGatherBcast, 2, 10.0), 20.0);
        assert_eq!(link_bytes(Op::AllGather, 1, 1000.0), 0.0);
        assert_eq!(link_bytes(Op::PsGatherBcast, 1, 1000.0), 0.0);
    }

    /// tc's units (`mbit`, `kbit`) in bytes per second, and rates or bursts that are not
    /// positive refused naming the key.
    #[test]
    fn tc_units_scale_and_non_positive_values_are_refused() {
        let dir = std::env::temp_dir().join(format!("gc-credit-units-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (rate, bytes_per_s) in [("100mbit", 100e6 / 8.0), ("500kbit", 500e3 / 8.0)] {
            std::fs::write(dir.join("netlab.txt"), format!("rate={rate}\nburst=1\n")).unwrap();
            let s = Shaper::from_run_dir(&dir).unwrap().unwrap();
            assert_eq!(s.rate_bytes_per_s, bytes_per_s, "{rate}");
            assert_eq!(s.burst_bytes, 1.0);
        }
        for (bad, key) in [
            ("rate=0gbit\nburst=262144\n", "'rate'"),
            ("rate=-1gbit\nburst=262144\n", "'rate'"),
            ("rate=infgbit\nburst=262144\n", "'rate'"),
            ("rate=1gbit\nburst=0\n", "'burst'"),
        ] {
            std::fs::write(dir.join("netlab.txt"), bad).unwrap();
            let e = Shaper::from_run_dir(&dir).unwrap_err().to_string();
            assert!(e.contains("netlab.txt") && e.contains(key), "{bad}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The description: the link's rate in Gbit/s and the burst; the dilation only when
    /// there is one (K > 1), with tbf's rate on the machine's clock, rate / K.
    #[test]
    fn the_description_names_the_dilation_only_above_one() {
        assert_eq!(gbit().describe(), "tbf 1.000 Gbit/s burst 250000 B");
        let s = Shaper {
            dilation: 4,
            ..gbit()
        };
        assert_eq!(
            s.describe(),
            "tbf 1.000 Gbit/s burst 250000 B (time dilation 4: tbf shaped to 0.250 Gbit/s on the machine's clock)"
        );
    }
}
