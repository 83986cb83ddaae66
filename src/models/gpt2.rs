//! GPT-2 small (Radford et al. 2019) as Hugging Face `GPT2LMHeadModel` registers it:
//! token and position embeddings, 12 pre-LayerNorm blocks (ln_1, fused QKV `c_attn`,
//! `c_proj`, ln_2, MLP `c_fc`/`c_proj`; HF `Conv1D` weights stored `[in, out]`), final
//! `ln_f`. The LM head is tied to the token embeddings and so is not a separate
//! parameter. Sequence length = the full context, 1024.

use super::{attribute, conv1d_hf, embedding, layernorm, Model, Tensor};

const VOCAB: usize = 50257;
/// Context length, also the per-sample sequence length.
pub const CONTEXT: usize = 1024;
const LAYERS: usize = 12;
const HIDDEN: usize = 768;

/// GPT-2 small, tied LM head.
pub fn gpt2_small() -> Model {
    let (h, s) = (HIDDEN, CONTEXT);
    let mut t: Vec<Tensor> = Vec::new();
    embedding(&mut t, "transformer.wte", VOCAB, h, s, false);
    embedding(&mut t, "transformer.wpe", CONTEXT, h, s, true);
    for l in 0..LAYERS {
        let p = format!("transformer.h.{l}");
        layernorm(&mut t, &format!("{p}.ln_1"), h, s);
        conv1d_hf(&mut t, &format!("{p}.attn.c_attn"), h, 3 * h, s);
        // Scores QKᵀ and context AV over the full s×s matrix (masked, not skipped).
        attribute(
            &mut t,
            &format!("{p}.attn.c_attn.weight"),
            2.0 * 2.0 * (s * s * h) as f64,
        );
        conv1d_hf(&mut t, &format!("{p}.attn.c_proj"), h, h, s);
        layernorm(&mut t, &format!("{p}.ln_2"), h, s);
        conv1d_hf(&mut t, &format!("{p}.mlp.c_fc"), h, 4 * h, s);
        conv1d_hf(&mut t, &format!("{p}.mlp.c_proj"), 4 * h, h, s);
    }
    layernorm(&mut t, "transformer.ln_f", h, s);
    // Tied LM head (h × vocab per position): no tensor of its own, attributed to ln_f.
    attribute(
        &mut t,
        "transformer.ln_f.weight",
        2.0 * (s * h * VOCAB) as f64,
    );
    Model {
        name: "gpt2-small".into(),
        variant:
            "GPT-2 small (L12 H768, vocab 50257, context 1024), LM head tied to token embeddings"
                .into(),
        tensors: t,
        default_batch: 8,
        input: "seq 1024",
    }
}
