//! Word-level LSTM language model on Penn Treebank as in PyTorch's
//! `examples/word_language_model` (the "large" setting of Zaremba et al. 2014):
//! `encoder` embedding (vocab 10000 × 1500), 2-layer `nn.LSTM(1500, 1500)` registered
//! as `rnn`, `decoder` Linear(1500, 10000) whose weight is either tied to the embedding
//! (`--tied`, Press & Wolf 2017) or separate. BPTT length 35 = one sample.

use super::{attribute, embedding, linear, lstm_layer, Model, Tensor};

const VOCAB: usize = 10000;
const HIDDEN: usize = 1500;
const LAYERS: usize = 2;
/// Back-propagation-through-time length: the per-sample sequence length.
pub const BPTT: usize = 35;

/// The PTB LSTM with a tied (`tied = true`) or separate decoder.
pub fn lstm_ptb(tied: bool) -> Model {
    let mut t: Vec<Tensor> = Vec::new();
    embedding(&mut t, "encoder", VOCAB, HIDDEN, BPTT, false);
    for l in 0..LAYERS {
        lstm_layer(&mut t, "rnn", l, HIDDEN, HIDDEN, BPTT);
    }
    if tied {
        // decoder.weight is encoder.weight: only the bias is registered; the decoder
        // matmul is attributed to it.
        t.push(Tensor {
            name: "decoder.bias".into(),
            shape: vec![VOCAB],
            fwd_flops: (BPTT * VOCAB) as f64,
        });
        attribute(&mut t, "decoder.bias", 2.0 * (BPTT * HIDDEN * VOCAB) as f64);
    } else {
        linear(&mut t, "decoder", HIDDEN, VOCAB, true, BPTT);
    }
    let (name, variant) = if tied {
        (
            "lstm-ptb",
            "2-layer LSTM-1500 on PTB (vocab 10000), decoder tied to embedding",
        )
    } else {
        (
            "lstm-ptb-untied",
            "2-layer LSTM-1500 on PTB (vocab 10000), separate decoder",
        )
    };
    Model {
        name: name.into(),
        variant: variant.into(),
        tensors: t,
        default_batch: 20,
        input: "seq 35",
    }
}
