//! Tests of the model zoo (`super`): tensor and parameter counts against
//! tests/data/models.csv, published FLOPs, registration order, layer geometry.

use super::*;

#[derive(serde::Deserialize)]
struct Row {
    model: String,
    tensors: usize,
    params: usize,
    fp32_bytes: usize,
    params_in_matrices: usize,
    variant: String,
}

fn reference() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/models.csv");
    let mut r = csv::Reader::from_path(path).expect("tests/data/models.csv");
    r.deserialize().map(|x| x.expect("row")).collect()
}

#[test]
fn every_model_matches_reference_counts_exactly() {
    let rows = reference();
    assert_eq!(
        rows.len(),
        names().len(),
        "models.csv and names() list different models"
    );
    for row in &rows {
        let m = build(&row.model).unwrap();
        assert_eq!(m.name, row.model);
        assert_eq!(m.tensors.len(), row.tensors, "{}: tensors", row.model);
        assert_eq!(m.params(), row.params, "{}: params", row.model);
        assert_eq!(m.fp32_bytes(), row.fp32_bytes, "{}: fp32_bytes", row.model);
        assert_eq!(
            m.params_in_matrices(),
            row.params_in_matrices,
            "{}: params_in_matrices",
            row.model
        );
        assert_eq!(m.variant, row.variant, "{}: variant", row.model);
    }
    for n in names() {
        assert!(
            rows.iter().any(|r| r.model == *n),
            "{n} missing from models.csv"
        );
    }
}

#[test]
fn tensors_are_well_formed() {
    for n in names() {
        let m = build(n).unwrap();
        let mut seen = std::collections::HashSet::new();
        for t in &m.tensors {
            assert!(
                seen.insert(t.name.clone()),
                "{n}: duplicate tensor {}",
                t.name
            );
            assert!(t.params() > 0, "{n}: {} empty", t.name);
            assert!(
                t.fwd_flops.is_finite() && t.fwd_flops >= 0.0,
                "{n}: {}",
                t.name
            );
            let (r, c) = t.rows_cols();
            assert_eq!(r * c, t.params());
            assert!(
                t.name.ends_with("weight") || t.name.ends_with("bias") || t.name.contains("_l"),
                "{}",
                t.name
            );
        }
        assert!(m.fwd_flops_per_sample() > 0.0);
        assert!(m.default_batch > 0);
        let b = m.backward_order();
        assert_eq!(b.len(), m.tensors.len());
        assert_eq!(b[0], m.tensors.len() - 1);
        assert_eq!(*b.last().unwrap(), 0);
        let table = m.layer_table();
        assert_eq!(table.lines().count(), m.tensors.len() + 2);
        assert!(m.summary_line().starts_with(n));
    }
}

#[test]
fn rows_cols_convention() {
    let conv = Tensor::new("c.weight", &[64, 3, 7, 7], 0.0);
    assert_eq!(conv.rows_cols(), (64, 147));
    let b = Tensor::new("c.bias", &[64], 0.0);
    assert_eq!(b.rows_cols(), (1, 64));
    assert_eq!(b.fp32_bytes(), 256);
    assert_eq!(conv.shape_str(), "64x3x7x7");
}

#[test]
fn unknown_model_lists_names() {
    let e = build("resnet-50").unwrap_err().to_string();
    assert!(e.contains("resnet-50"), "{e}");
    for n in names() {
        assert!(e.contains(n), "{e}");
    }
}

#[test]
fn layer_helpers_geometry() {
    let mut t = Vec::new();
    // ResNet-50 stem: 224 → 112, 2·112²·64·3·49 FLOPs.
    let hw = conv2d(&mut t, "conv1", 3, 64, 7, 2, 3, 1, false, (224, 224));
    assert_eq!(hw, (112, 112));
    assert_eq!(t[0].fwd_flops, 2.0 * 112.0 * 112.0 * 64.0 * 147.0);
    assert_eq!(window_out(hw, 3, 2, 1), (56, 56));
    // Grouped conv: each output channel sees cin/groups inputs.
    let hw = conv2d(&mut t, "g", 96, 256, 5, 1, 2, 2, true, (27, 27));
    assert_eq!(hw, (27, 27));
    assert_eq!(t[1].shape, vec![256, 48, 5, 5]);
    assert_eq!(t[1].fwd_flops, 2.0 * 27.0 * 27.0 * 256.0 * 48.0 * 25.0);
    assert_eq!(t[2].fwd_flops, 27.0 * 27.0 * 256.0);
    let mut t = Vec::new();
    lstm_layer(&mut t, "rnn", 1, 1500, 1500, 35);
    assert_eq!(t[0].name, "rnn.weight_ih_l1");
    assert_eq!(t[1].shape, vec![6000, 1500]);
    assert_eq!(t[3].name, "rnn.bias_hh_l1");
}

/// Sum of forward FLOPs of a model's weight matrices/kernels only (2+ dims, i.e. the
/// conv and linear multiply-adds the published GMAC figures count), in GMACs.
fn gmacs_of_matrices(m: &Model) -> f64 {
    m.tensors
        .iter()
        .filter(|t| t.shape.len() >= 2)
        .map(|t| t.fwd_flops)
        .sum::<f64>()
        / 2e9
}

fn close(name: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= rel * want,
        "{name}: got {got}, want {want} ± {:.1}%",
        rel * 100.0
    );
}

#[test]
fn cnn_flops_match_published_figures() {
    // Published conv+linear multiply-adds per image (e.g. ptflops / torchvision docs):
    // ResNet-20 40.6 M (He et al. 2016 CIFAR), ResNet-50 4.09 G, ResNet-152 11.5 G,
    // VGG-16 15.47 G, VGG-16 (CIFAR) 0.313 G, AlexNet 0.714 G; BVLC AlexNet 0.724 G
    // (105.4 + 223.9 + 149.5 + 112.1 + 74.8 M conv + 58.6 M fc, grouped conv2/4/5).
    for (n, want) in [
        ("resnet20", 0.0406),
        ("resnet50", 4.09),
        ("resnet152", 11.5),
        ("vgg16", 15.47),
        ("vgg16-cifar", 0.313),
        ("alexnet", 0.714),
        ("alexnet-caffe", 0.724),
    ] {
        let m = build(n).unwrap();
        close(n, gmacs_of_matrices(&m), want, 0.01);
        // Biases and norms add well under 2 %.
        let total = m.fwd_flops_per_sample() / 2e9;
        assert!(
            total >= gmacs_of_matrices(&m) && total < 1.02 * gmacs_of_matrices(&m),
            "{n}: {total}"
        );
    }
}

#[test]
fn transformer_and_lstm_flops_match_derivations() {
    // BERT-base encoder, seq s = 128: per token 12 layers × (4·768² + 2·768·3072)
    // = 84.93 M MACs (= its 85 M encoder weights), plus attention 12 × 2·s·768 per
    // token: 10.87 G + 0.302 G = 11.17 GMACs per sequence (the usual "11.2 GMACs").
    let m = build("bert-base").unwrap();
    let enc: f64 = m
        .tensors
        .iter()
        .filter(|t| t.name.contains("encoder.layer") && t.shape.len() >= 2)
        .map(|t| t.fwd_flops)
        .sum();
    close("bert-base encoder", enc / 2e9, 11.17, 0.005);
    // Whole model adds the MLM head on all 128 positions (768² + 768·30528 per
    // token = 3.08 G), pooler and NSP: 14.25 GMACs = 28.5 GFLOPs.
    close("bert-base", m.fwd_flops_per_sample() / 1e9, 28.5, 0.01);
    // Rule of thumb 2·N FLOPs per token on the non-embedding weights.
    let m = build("bert-large").unwrap();
    let enc: f64 = m
        .tensors
        .iter()
        .filter(|t| t.name.contains("encoder.layer"))
        .map(|t| t.fwd_flops)
        .sum();
    // 24 × (12·1024² MACs per token · 128 + 2·128²·1024) = 38.65 + 0.81 G MACs.
    close(
        "bert-large encoder",
        enc / 2e9,
        24.0 * (12.0 * 1024.0 * 1024.0 * 128.0 + 2.0 * 128.0 * 128.0 * 1024.0) / 1e9,
        0.01,
    );

    // GPT-2 small, s = 1024: per token 12 × 12·768² = 84.93 M MACs in the blocks plus
    // the tied LM head 768·50257 = 38.60 M; attention 12 × 2·1024²·768 = 19.33 G per
    // sequence. (84.93 + 38.60) M · 1024 + 19.33 G = 145.82 GMACs = 291.6 GFLOPs.
    let m = build("gpt2-small").unwrap();
    close("gpt2-small", m.fwd_flops_per_sample() / 2e9, 145.82, 0.005);
    let head = m.tensors[m.tensor_index("transformer.ln_f.weight").unwrap()].fwd_flops;
    assert!(head > 2.0 * 1024.0 * 768.0 * 50257.0);
    assert_eq!(m.tensors[0].fwd_flops, 0.0, "token lookup is a gather");

    // LSTM: per step 2 layers × 4·1500·3000 = 36 M MACs plus decoder 15 M; × 35 steps
    // = 1.785 GMACs per sequence, tied or not.
    for n in ["lstm-ptb", "lstm-ptb-untied"] {
        let m = build(n).unwrap();
        close(n, m.fwd_flops_per_sample() / 2e9, 1.785, 0.001);
    }
}

#[test]
fn registration_order_samples() {
    let names_at = |m: &str, idx: &[usize]| {
        let m = build(m).unwrap();
        idx.iter()
            .map(|&i| m.tensors[i].name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names_at("resnet50", &[0, 1, 2, 3, 12, 13, 159, 160]),
        [
            "conv1.weight",
            "bn1.weight",
            "bn1.bias",
            "layer1.0.conv1.weight",
            "layer1.0.downsample.0.weight",
            "layer1.0.downsample.1.weight",
            "fc.weight",
            "fc.bias"
        ]
    );
    assert_eq!(
        names_at("vgg16", &[0, 2, 25, 26, 31]),
        [
            "features.0.weight",
            "features.2.weight",
            "features.28.bias",
            "classifier.0.weight",
            "classifier.6.bias"
        ]
    );
    assert_eq!(
        names_at("bert-base", &[0, 5, 199, 200, 205]),
        [
            "bert.embeddings.word_embeddings.weight",
            "bert.encoder.layer.0.attention.self.query.weight",
            "cls.predictions.bias",
            "cls.predictions.transform.dense.weight",
            "cls.seq_relationship.bias"
        ]
    );
    assert_eq!(
        names_at("gpt2-small", &[0, 1, 2, 4, 147]),
        [
            "transformer.wte.weight",
            "transformer.wpe.weight",
            "transformer.h.0.ln_1.weight",
            "transformer.h.0.attn.c_attn.weight",
            "transformer.ln_f.bias"
        ]
    );
    assert_eq!(
        names_at("lstm-ptb-untied", &[0, 1, 9, 10]),
        [
            "encoder.weight",
            "rnn.weight_ih_l0",
            "decoder.weight",
            "decoder.bias"
        ]
    );
}
