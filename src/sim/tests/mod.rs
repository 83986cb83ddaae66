//! Tests of the simulator (`super`), one file per theme: `schedule.rs` (the schedule by
//! hand, pipelining, collectives, speed), `bucketing.rs` (wires and bucket plans),
//! `cost_model.rs` (cost model parts), `comparison.rs` (rows against measured e2e),
//! `host_model.rs` (host effects and calibration), `device.rs` (device compression),
//! `shaper.rs` (the links' token-bucket credit), `parts.rs` (this module's own parts by hand).
//! Here: the shared helpers (a linear network `Lin`, the `tiny` workload and its costs).

use super::network::{CollectiveCost, Op};
use super::*;

mod bucketing;
mod comparison;
mod cost_model;
mod device;
mod engine_vs_sim;
mod host_model;
mod parts;
mod schedule;
mod shaper;

/// `t = a + b * bytes` for every collective; no reduction cost.
struct Lin {
    a: f64,
    b: f64,
}

impl CollectiveCost for Lin {
    fn time_s(&self, _op: Op, n: usize, m: f64) -> f64 {
        if n <= 1 {
            0.0
        } else {
            self.a + self.b * m
        }
    }
    fn reduce_s(&self, _bytes: f64) -> f64 {
        0.0
    }
    fn describe(&self) -> String {
        "lin".into()
    }
    fn with_gamma(&self, _gamma_s_per_byte: f64) -> Box<dyn CollectiveCost> {
        Box::new(Lin {
            a: self.a,
            b: self.b,
        })
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + b.abs())
}

fn tiny() -> SimWorkload {
    let t = |name: &str, cols: usize| TensorSpec {
        name: name.into(),
        rows: 1,
        cols,
    };
    SimWorkload {
        model: "tiny".into(),
        tensors: vec![t("a", 100), t("b", 200), t("c", 300)],
        bwd_s: vec![0.3, 0.2, 0.1],
        fwd_s: 1.0,
        batch: 1,
        device: "test".into(),
    }
}

fn tiny_costs() -> CostModel {
    let mut c = CostModel::with_network(Box::new(Lin { a: 0.01, b: 1e-4 }));
    c.methods.insert(
        "ssgd".into(),
        MethodCosts {
            compress: CompressCost {
                per_element_s: 1e-4,
                ..CompressCost::default()
            },
            feedback: CompressCost::default(),
            decompress: CompressCost {
                per_element_s: 1e-4,
                ..CompressCost::default()
            },
        },
    );
    c.pack_s_per_byte = 0.0;
    c.pack_fixed_s = 0.001;
    c
}

/// A device whose every kernel costs `launch_s` (infinite bandwidth and flops).
fn launch_only_device(launch_s: f64) -> crate::devcost::DeviceCosts {
    crate::devcost::DeviceCosts {
        spec: crate::roofline::DeviceSpec {
            name: "t".into(),
            launch_s,
            mem_bytes_per_s: 1e30,
            flops_per_s: 1e30,
            readings: Vec::new(),
        },
        profile: None,
    }
}

/// S-SGD on [`tiny`], one bucket per tensor, native collectives, 2 workers.
fn tiny_ssgd(pipelining: bool) -> SimCase {
    SimCase::new(
        tiny(),
        "ssgd",
        Fusion::None,
        pipelining,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    )
}
