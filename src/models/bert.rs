//! BERT pre-training model (Devlin et al. 2019) as Hugging Face `BertForPreTraining` /
//! NVIDIA DeepLearningExamples register it: embeddings (word, position 512, token type
//! 2, LayerNorm), L encoder layers (Q, K, V, attention output dense + LayerNorm,
//! intermediate dense, output dense + LayerNorm), pooler, MLM head (decoder bias, then
//! transform dense + LayerNorm; the decoder weight is tied to the word embeddings and so
//! is not a separate parameter) and NSP head (`seq_relationship`). The vocabulary is
//! padded from 30522 to 30528 (a multiple of 8, NVIDIA's recipe). Sequence length 128
//! (pre-training phase 1).

use super::{attribute, embedding, layernorm, linear, Model, Tensor};

/// Architecture hyper-parameters.
struct Config {
    layers: usize,
    hidden: usize,
    intermediate: usize,
}

const VOCAB: usize = 30528;
const MAX_POSITIONS: usize = 512;
const TYPE_VOCAB: usize = 2;
/// Pre-training phase 1 sequence length.
pub const SEQ: usize = 128;

fn bert(name: &str, c: Config, default_batch: usize, variant: &str) -> Model {
    let (h, s) = (c.hidden, SEQ);
    let mut t: Vec<Tensor> = Vec::new();
    embedding(
        &mut t,
        "bert.embeddings.word_embeddings",
        VOCAB,
        h,
        s,
        false,
    );
    embedding(
        &mut t,
        "bert.embeddings.position_embeddings",
        MAX_POSITIONS,
        h,
        s,
        true,
    );
    embedding(
        &mut t,
        "bert.embeddings.token_type_embeddings",
        TYPE_VOCAB,
        h,
        s,
        true,
    );
    layernorm(&mut t, "bert.embeddings.LayerNorm", h, s);
    for l in 0..c.layers {
        let p = format!("bert.encoder.layer.{l}");
        linear(&mut t, &format!("{p}.attention.self.query"), h, h, true, s);
        linear(&mut t, &format!("{p}.attention.self.key"), h, h, true, s);
        linear(&mut t, &format!("{p}.attention.self.value"), h, h, true, s);
        // Scores QKᵀ and context AV: s·s·h multiply-adds each (all heads together).
        attribute(
            &mut t,
            &format!("{p}.attention.self.value.weight"),
            2.0 * 2.0 * (s * s * h) as f64,
        );
        linear(
            &mut t,
            &format!("{p}.attention.output.dense"),
            h,
            h,
            true,
            s,
        );
        layernorm(&mut t, &format!("{p}.attention.output.LayerNorm"), h, s);
        linear(
            &mut t,
            &format!("{p}.intermediate.dense"),
            h,
            c.intermediate,
            true,
            s,
        );
        linear(
            &mut t,
            &format!("{p}.output.dense"),
            c.intermediate,
            h,
            true,
            s,
        );
        layernorm(&mut t, &format!("{p}.output.LayerNorm"), h, s);
    }
    // Pooler: dense + tanh on the `[CLS]` position.
    linear(&mut t, "bert.pooler.dense", h, h, true, 1);
    // MLM head: its own parameter (the decoder bias) is registered before its
    // submodules. The tied decoder matmul (h × vocab per position) is attributed to it.
    t.push(Tensor {
        name: "cls.predictions.bias".into(),
        shape: vec![VOCAB],
        fwd_flops: (s * VOCAB) as f64,
    });
    attribute(&mut t, "cls.predictions.bias", 2.0 * (s * h * VOCAB) as f64);
    linear(&mut t, "cls.predictions.transform.dense", h, h, true, s);
    layernorm(&mut t, "cls.predictions.transform.LayerNorm", h, s);
    // NSP head on the pooled output.
    linear(&mut t, "cls.seq_relationship", h, 2, true, 1);
    Model {
        name: name.into(),
        variant: variant.into(),
        tensors: t,
        default_batch,
        input: "seq 128",
    }
}

/// BERT-Base: L = 12, H = 768, 12 heads, intermediate 3072.
pub fn bert_base() -> Model {
    bert(
        "bert-base",
        Config { layers: 12, hidden: 768, intermediate: 3072 },
        32,
        "BERT-Base pre-training model (L12 H768), vocabulary padded to 30528, decoder tied to word embeddings",
    )
}

/// BERT-Large: L = 24, H = 1024, 16 heads, intermediate 4096.
pub fn bert_large() -> Model {
    bert(
        "bert-large",
        Config { layers: 24, hidden: 1024, intermediate: 4096 },
        8,
        "BERT-Large pre-training model (L24 H1024), vocabulary padded to 30528, decoder tied to word embeddings",
    )
}
