//! Device-side compression costs (docs/device.md, "Device compression costs"): what
//! a method's compression would cost on a GPU, as the sequence of kernels its reference
//! implementation launches. Each compressor lists its kernels
//! ([`crate::compress::Compressor::device_kernels`]); a [`DeviceSpec`] prices each one
//! with a roofline, `launch_s + max(bytes / memory bandwidth, flops / throughput)`.
//! The kernels still run for real on the host (wires and fidelity stay real); only the
//! time charged to the iteration comes from here when compression runs on the device
//! (`--compress-on device`).

use crate::roofline::{DeviceSpec, Kernel, Stage};
use std::fmt;

pub mod profile;

/// Where compression, packing and the reduction arithmetic are charged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressOn {
    /// On the host CPU, on the communication thread, at measured (e2e) or fitted
    /// (simulate) host speed.
    #[default]
    Host,
    /// On the emulated device's stream, at a device cost model's or profile's speed.
    Device,
}

impl CompressOn {
    pub const ALL: [CompressOn; 2] = [CompressOn::Host, CompressOn::Device];

    pub fn parse(s: &str) -> Option<CompressOn> {
        match s {
            "host" => Some(CompressOn::Host),
            "device" => Some(CompressOn::Device),
            _ => None,
        }
    }

    /// For serde's `skip_serializing_if`.
    pub fn is_host(&self) -> bool {
        *self == CompressOn::Host
    }

    pub fn name(self) -> &'static str {
        match self {
            CompressOn::Host => "host",
            CompressOn::Device => "device",
        }
    }
}

impl fmt::Display for CompressOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The device compression costs a run charges: a [`DeviceSpec`] (preset) pricing each
/// method's kernels, or a measured [`profile::CompressProfile`] where it has the
/// operation (its copy rows then price the copies).
#[derive(Clone, Debug)]
pub struct DeviceCosts {
    pub spec: DeviceSpec,
    pub profile: Option<std::sync::Arc<profile::CompressProfile>>,
}

impl DeviceCosts {
    /// Costs from preset `name`; the error lists the presets.
    /// Costs from preset `name` (or `NAME:launch_us=X`, [`DeviceSpec::parse`]); the
    /// error lists the presets.
    pub fn preset(name: &str) -> Result<DeviceCosts, String> {
        DeviceSpec::parse(name).map(|spec| DeviceCosts {
            spec,
            profile: None,
        })
    }

    /// Preset `name` with measured times from `profile` where it has them.
    pub fn with_profile(mut self, profile: std::sync::Arc<profile::CompressProfile>) -> Self {
        self.profile = Some(profile);
        self
    }

    /// Time of one operation's kernels (s) by the roofline.
    pub fn kernels_s(&self, list: &[Kernel]) -> f64 {
        list.iter().map(|k| self.spec.kernel_s(k)).sum()
    }

    /// Time of `stage` of `method`'s `round` in steps of `phase` on a `rows x cols` unit
    /// among `world_size` workers: the profile's measurement, else the profile's
    /// interpolation over element counts ([`profile::CompressProfile::time_s_by_elements`]:
    /// merged buckets), else the roofline of the method's kernels `list`.
    #[allow(clippy::too_many_arguments)]
    pub fn op_s(
        &self,
        method: &str,
        stage: Stage,
        round: usize,
        phase: usize,
        (rows, cols): (usize, usize),
        world_size: usize,
        list: &[Kernel],
    ) -> f64 {
        self.profile
            .as_ref()
            .and_then(|p| {
                p.time_s(method, stage, round, phase, rows, cols, world_size)
                    .or_else(|| {
                        p.time_s_by_elements(method, stage, round, phase, rows * cols, world_size)
                    })
            })
            .unwrap_or_else(|| self.kernels_s(list))
    }

    /// Time of a copy of `bytes` in `launches` kernels: the profile's fitted copy line,
    /// else the preset's.
    pub fn copy_s(&self, bytes: f64, launches: usize) -> f64 {
        match self.profile.as_ref().and_then(|p| p.copy_spec()) {
            Some(c) => c.copy_s(bytes, launches),
            None => self.spec.copy_s(bytes, launches),
        }
    }

    /// Device time of unit `t` (`shape`) of `comp`'s compress and decompress over all
    /// `rounds` of steps of `phase` (what the planners charge per unit).
    pub fn unit_s(
        &self,
        comp: &dyn crate::compress::Compressor,
        t: usize,
        shape: (usize, usize),
        rounds: usize,
        phase: usize,
        world_size: usize,
    ) -> f64 {
        let mut total = 0.0;
        for r in 0..rounds {
            for st in [Stage::Compress, Stage::Decompress] {
                let mut v = Vec::new();
                comp.device_kernels(t, r, phase, st, &mut |k| v.push(k));
                total += self.op_s(comp.name(), st, r, phase, shape, world_size, &v);
            }
        }
        total
    }

    /// For `cost_source`: `device v100 (roofline: 720 GB/s, 11.0 TFLOP/s, 5 us/launch)`,
    /// plus the profile when one is used.
    pub fn describe(&self) -> String {
        let s = &self.spec;
        let roofline = format!(
            "device {} (roofline: {:.0} GB/s, {:.1} TFLOP/s, {:.0} us/launch)",
            s.name,
            s.mem_bytes_per_s / 1e9,
            s.flops_per_s / 1e12,
            s.launch_s * 1e6
        );
        match &self.profile {
            Some(p) => format!("{}; else {roofline}", p.describe()),
            None => roofline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compress_on_round_trips() {
        for c in CompressOn::ALL {
            assert_eq!(CompressOn::parse(c.name()), Some(c));
        }
        assert_eq!(CompressOn::parse("gpu"), None);
    }
}
