//! Tests of the compute model (`super`): the device presets against their documented
//! numbers, FLOPs-based backward times, and measured profiles (round trip, errors).

use super::super::build;
use super::*;

fn tmp(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gradcomp-models-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn good_body(m: &Model, forward: bool) -> String {
    let mut s = String::from("# measured on a test rig\ntensor,backward_s");
    s.push_str(if forward { ",forward_s\n" } else { "\n" });
    // Any order is accepted; write them in backward order.
    for i in m.backward_order() {
        s.push_str(&format!(
            "{},{}{}\n",
            m.tensors[i].name,
            1e-3 * (i + 1) as f64,
            if forward { "," } else { "" }
        ));
    }
    if forward {
        s.push_str("__forward__,,0.5\n");
    }
    s
}

#[test]
fn presets_are_documented_and_consistent() {
    for n in ["v100", "rtx2080ti", "a100", "h100", "p102-100"] {
        let p = preset(n).unwrap();
        assert_eq!(p.name, n);
        assert!((p.effective_tflops - p.peak_tflops * p.utilisation).abs() < 1e-9);
        assert!(
            p.description.contains(&format!("{}", p.peak_tflops)),
            "{}",
            p.description
        );
    }
    assert!((preset("v100").unwrap().effective_tflops - 37.5).abs() < 1e-9);
    assert!((preset("a100").unwrap().effective_tflops - 93.6).abs() < 1e-9);
    assert!((preset("h100").unwrap().effective_tflops - 296.7).abs() < 1e-9);
    assert!((preset("rtx2080ti").unwrap().effective_tflops - 16.14).abs() < 1e-9);
    // P102-100: fp32 from its configuration, 3200 cores x 2 FLOP x 1.683 GHz.
    let p102 = preset("p102-100").unwrap();
    assert!((p102.peak_tflops - 3200.0 * 2.0 * 1.683e9 / 1e12).abs() < 1e-9);
    assert!((p102.effective_tflops - 0.3 * 10.7712).abs() < 1e-9);
    let e = preset("p100").unwrap_err().to_string();
    assert!(
        e.contains("p100") && e.contains("v100, rtx2080ti, a100, h100, p102-100"),
        "{e}"
    );
    assert_eq!(presets().len(), 5);
}

#[test]
fn flops_based_times() {
    let m = build("resnet50").unwrap();
    let p = preset("v100").unwrap();
    let c = ComputeModel::from_preset(&p);
    let b = c.backward_times_s(&m, 64);
    assert_eq!(b.len(), m.tensors.len());
    for (t, s) in m.tensors.iter().zip(&b) {
        assert!((s - 2.0 * t.fwd_flops * 64.0 / 37.5e12).abs() <= 1e-15);
    }
    let fwd = c.forward_time_s(&m, 64);
    let total: f64 = b.iter().sum();
    assert!((total - 2.0 * fwd).abs() < 1e-12);
    // ResNet-50, 64 images at 37.5 TFLOP/s: ≈ 8.2e9 · 64 / 37.5e12 ≈ 14 ms forward.
    assert!(fwd > 0.0135 && fwd < 0.0145, "{fwd}");
    assert!(c.describe().contains("v100"));
    assert_eq!(c.effective_tflops(), Some(37.5));
    // Twice the throughput, half the time.
    let c2 = ComputeModel::from_preset(&DevicePreset {
        effective_tflops: 75.0,
        ..p
    });
    assert!((c2.forward_time_s(&m, 64) * 2.0 - fwd).abs() < 1e-12);
}

#[test]
fn profile_round_trip() {
    let m = build("resnet20").unwrap();
    let p = tmp("good.csv", &good_body(&m, false));
    let b = load_profile(&p, &m).unwrap();
    assert_eq!(b.len(), m.tensors.len());
    for (i, s) in b.iter().enumerate() {
        assert!((s - 1e-3 * (i + 1) as f64).abs() < 1e-15);
    }
    let prof = read_profile(&p, &m).unwrap();
    assert_eq!(prof.forward_s, None);
    let c = ComputeModel::from_profile(prof);
    assert_eq!(c.backward_times_s(&m, 999), b);
    assert!((c.forward_time_s(&m, 1) - b.iter().sum::<f64>() / 2.0).abs() < 1e-12);
    assert_eq!(c.effective_tflops(), None);

    let p = tmp("good_fwd.csv", &good_body(&m, true));
    let prof = read_profile(&p, &m).unwrap();
    assert_eq!(prof.forward_s, Some(0.5));
    assert_eq!(ComputeModel::from_profile(prof).forward_time_s(&m, 1), 0.5);
}

fn bad(name: &str, body: &str, m: &Model, expect: &[&str]) {
    let p = tmp(name, body);
    let e = load_profile(&p, m).unwrap_err().to_string();
    assert!(e.contains(name), "{e}");
    for x in expect {
        assert!(e.contains(x), "expected '{x}' in: {e}");
    }
}

#[test]
fn profile_errors_are_clear() {
    let m = build("lstm-ptb").unwrap();
    let good = good_body(&m, false);
    bad("empty.csv", "", &m, &["empty", "tensor,backward_s"]);
    bad("header_only.csv", "tensor,backward_s\n", &m, &["no rows"]);
    bad(
        "wrong_header.csv",
        "layer,seconds\nencoder.weight,1\n",
        &m,
        &["line 1", "unknown column 'layer'"],
    );
    bad(
        "missing_col.csv",
        "tensor\nencoder.weight\n",
        &m,
        &["'backward_s'"],
    );
    // Header on line 2 (after the comment), first row on line 3.
    bad(
        "unknown.csv",
        &good.replace("encoder.weight", "embedding.weight"),
        &m,
        &[
            "'embedding.weight' is not a tensor of model lstm-ptb",
            "gradcomp models lstm-ptb",
        ],
    );
    bad(
        "dup.csv",
        &format!("{good}decoder.bias,1\n"),
        &m,
        &["line 13", "'decoder.bias' appears again (first on line 3)"],
    );
    let missing: String = good
        .lines()
        .filter(|l| !l.starts_with("rnn.bias_hh_l1"))
        .map(|l| format!("{l}\n"))
        .collect();
    bad(
        "missing.csv",
        &missing,
        &m,
        &["1 of the 10 tensors", "rnn.bias_hh_l1", "exactly once"],
    );
    bad(
        "nan.csv",
        &good.replace("decoder.bias,0.01", "decoder.bias,fast"),
        &m,
        &[
            "line 3",
            "backward_s = 'fast' for tensor 'decoder.bias'",
            "non-negative number of seconds",
        ],
    );
    bad(
        "neg.csv",
        &good.replace("decoder.bias,0.01", "decoder.bias,-1"),
        &m,
        &["'-1'"],
    );
    bad(
        "fields.csv",
        &good.replace("decoder.bias,0.01", "decoder.bias,0.01,7"),
        &m,
        &["line 3", "3 fields"],
    );
    bad(
        "fwd_nocol.csv",
        &format!("{good}__forward__,0.1\n"),
        &m,
        &["forward_s' column"],
    );
    let gf = good_body(&m, true);
    bad(
        "fwd_on_tensor.csv",
        &gf.replace("decoder.bias,0.01,", "decoder.bias,0.01,3"),
        &m,
        &["forward_s = '3' on tensor row"],
    );
    bad(
        "fwd_twice.csv",
        &format!("{gf}__forward__,,0.4\n"),
        &m,
        &["'__forward__' appears again"],
    );
    bad(
        "fwd_bwd.csv",
        &gf.replace("__forward__,,0.5", "__forward__,0.1,0.5"),
        &m,
        &["leave backward_s empty"],
    );
    let e = load_profile("/nonexistent/dir/p.csv", &m)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/dir/p.csv"), "{e}");
}

#[test]
#[should_panic(expected = "loaded for model lstm-ptb")]
fn profile_for_other_model_panics() {
    let m = build("lstm-ptb").unwrap();
    let p = tmp("other.csv", &good_body(&m, false));
    let c = ComputeModel::from_profile(read_profile(&p, &m).unwrap());
    c.backward_times_s(&build("lstm-ptb-untied").unwrap(), 1);
}
