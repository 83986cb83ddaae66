//! Model zoo: the parameter tensors of the models the end-to-end benchmark emulates, in
//! PyTorch registration order (`model.parameters()`), each with its forward FLOPs per
//! sample. [`compute`] turns FLOPs into per-layer backward times.
//!
//! Every model is built in code from its architecture (depth, widths, kernel sizes,
//! strides) by small layer constructors that compute output sizes and FLOPs from the
//! layer geometry; `tests/data/models.csv` holds the exact tensor and parameter counts
//! each model must reproduce.
//!
//! # FLOPs convention
//! - One multiply-add = 2 FLOPs. "Per sample" means per image, or per sequence for the
//!   sequence models: BERT at sequence length 128 (pre-training phase 1), GPT-2 at its
//!   full context of 1024, the PTB LSTM at the BPTT length of 35.
//! - A layer's matmul/convolution FLOPs are attributed to its weight tensor. A bias gets
//!   one FLOP per output element; a BatchNorm/LayerNorm weight gets 4 FLOPs per
//!   normalised element (statistics, normalise, scale) and its bias 1 (shift). An
//!   embedding lookup is a gather (0 FLOPs); the embeddings that are *added* to it
//!   (BERT position/token type, GPT-2 position) get one FLOP per element.
//! - Layers without parameters (activations, pooling, dropout, softmax, residual adds,
//!   the LSTM cell's pointwise gates) are not counted, as in the usual published figures
//!   (ResNet-50 ≈ 4.1 GMACs), except for the matmuls inside attention, which are large:
//!   the scores `QKᵀ` and the context `AV` (2·s²·H multiply-adds per layer, the full
//!   s×s matrix even for GPT-2's causal mask, as dense kernels compute it) are
//!   attributed to the attention's Q/K/V projection weight (BERT:
//!   `attention.self.value.weight`, the first Q/K/V weight in backward order; GPT-2:
//!   `attn.c_attn.weight`), since the real backward runs them after the output
//!   projection's gradient and before the Q/K/V gradients.
//! - An output projection tied to the input embedding has no weight tensor of its own.
//!   Its matmul is attributed to the head's own tensor that the backward reaches first:
//!   BERT's decoder bias `cls.predictions.bias`, the tied LSTM's `decoder.bias`, and
//!   (GPT-2's LM head has no tensor at all) the final LayerNorm `transformer.ln_f.weight`.
//!   This keeps that time at the start of the emulated backward, where the real backward
//!   spends it; putting it on the embedding (the last gradient) would make every other
//!   gradient look ready too early.
//! - BERT's MLM head is applied to all 128 positions (as in Hugging Face
//!   `BertForPreTraining`), the pooler and NSP head to the `[CLS]` position only.
//!
//! # Backward order
//! [`Model::backward_order`] is the reverse of registration order. That is an
//! approximation of when gradients become ready (it is what PyTorch DDP assumes for its
//! first iteration's buckets): for sequential networks it is exact up to the order of a
//! layer's weight and bias, but tied weights (ready only when their last use finishes),
//! residual branches (a ResNet downsample shortcut is registered after the block's main
//! path but its gradient is ready at about the same time as the block's first conv)
//! and heads run in parallel (BERT's MLM and NSP heads) deviate from it.
//!
//! # Default batch (per worker)
//! resnet20 128, resnet50 64, resnet152 32, vgg16 64, vgg16-cifar 128, alexnet and
//! alexnet-caffe 128, bert-base 32, bert-large 8, gpt2-small 8, lstm-ptb(-untied) 20:
//! common per-GPU batches in the gradient-compression literature and the reference
//! training scripts (CIFAR 128; torchvision ImageNet 32–64 on a 16–32 GB GPU; BERT
//! phase 1 at seq 128; PTB word language model batch 20).

use std::fmt::Write as _;

use thiserror::Error;

pub mod alexnet;
pub mod bert;
pub mod compute;
pub mod gpt2;
pub mod lstm;
pub mod resnet;
mod tensor_spec;
pub mod vgg;

pub use compute::{load_profile, preset, presets, ComputeModel, DevicePreset, Profile};
pub use tensor_spec::TensorSpec;

/// Errors from the model zoo and the compute model.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The model name is not in the zoo.
    #[error("unknown model '{name}'; choose one of: {}", names().join(", "))]
    UnknownModel { name: String },
    /// The device preset name is not known.
    #[error("unknown device preset '{name}'; choose one of: {allowed} (or give measured per-layer times with --compute-profile FILE.csv)")]
    UnknownPreset { name: String, allowed: String },
    /// A compute profile could not be opened or read (not a regular file, too large).
    #[error(transparent)]
    ProfileFile(#[from] crate::input::InputError),
    /// A compute profile could not be read part way.
    #[error("cannot read compute profile {path}: {source}")]
    ProfileIo {
        path: String,
        source: std::io::Error,
    },
    /// A compute profile is malformed or does not match the model. `line` is 1-based
    /// (0 when the problem concerns the file as a whole).
    #[error("compute profile {path}{}: {msg}", if *line > 0 { format!(", line {line}") } else { String::new() })]
    Profile {
        path: String,
        line: u64,
        msg: String,
    },
}

/// Bad input: exit code 2 ([`crate::error::Error::Usage`]).
impl From<ModelError> for crate::error::Error {
    fn from(e: ModelError) -> Self {
        crate::error::Error::Usage(Box::new(e))
    }
}

/// One parameter tensor of a model.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// PyTorch parameter name, e.g. `layer1.0.conv1.weight`.
    pub name: String,
    /// PyTorch shape (conv weights `[out, in/groups, kh, kw]`, linear `[out, in]`,
    /// GPT-2's `Conv1D` weights `[in, out]` as Hugging Face stores them).
    pub shape: Vec<usize>,
    /// Forward FLOPs per sample attributed to this tensor (see the module doc).
    pub fwd_flops: f64,
}

impl Tensor {
    fn new(name: impl Into<String>, shape: &[usize], fwd_flops: f64) -> Tensor {
        Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            fwd_flops,
        }
    }

    /// Number of parameters (elements).
    pub fn params(&self) -> usize {
        self.shape.iter().product()
    }

    /// Matrix view used by the compressors: `(shape[0], numel / shape[0])` for tensors
    /// with 2+ dimensions (a conv weight is `out × in·kh·kw`), `(1, numel)` for 1-D.
    pub fn rows_cols(&self) -> (usize, usize) {
        let n = self.params();
        if self.shape.len() >= 2 && self.shape[0] > 0 {
            (self.shape[0], n / self.shape[0])
        } else {
            (1, n)
        }
    }

    /// Bytes of the tensor in fp32.
    pub fn fp32_bytes(&self) -> usize {
        4 * self.params()
    }

    /// The shape written as `a x b x c`.
    pub fn shape_str(&self) -> String {
        self.shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x")
    }
}

/// A model: its parameter tensors in registration order and what one sample is.
#[derive(Clone, Debug)]
pub struct Model {
    /// Zoo name, e.g. `resnet50`.
    pub name: String,
    /// What exactly is modelled (matches the `variant` column of tests/data/models.csv).
    pub variant: String,
    /// Parameter tensors in registration order (PyTorch `model.parameters()`).
    pub tensors: Vec<Tensor>,
    /// Default per-worker batch size (samples).
    pub default_batch: usize,
    /// One sample: `3x224x224`, `seq 128`, ...
    pub input: &'static str,
}

impl Model {
    /// Tensor indices in the order their gradients are assumed ready: the reverse of
    /// registration order (an approximation, see the module doc).
    pub fn backward_order(&self) -> Vec<usize> {
        (0..self.tensors.len()).rev().collect()
    }

    /// Total number of parameters.
    pub fn params(&self) -> usize {
        self.tensors.iter().map(Tensor::params).sum()
    }

    /// Bytes of all parameters (= of one full gradient) in fp32.
    pub fn fp32_bytes(&self) -> usize {
        4 * self.params()
    }

    /// Parameters in tensors with 2 or more dimensions (what low-rank methods compress).
    #[cfg(test)]
    fn params_in_matrices(&self) -> usize {
        self.tensors
            .iter()
            .filter(|t| t.shape.len() >= 2)
            .map(Tensor::params)
            .sum()
    }

    /// Forward FLOPs per sample (image or sequence) of the whole model.
    pub fn fwd_flops_per_sample(&self) -> f64 {
        self.tensors.iter().map(|t| t.fwd_flops).sum()
    }

    /// Index of the tensor with this name.
    pub fn tensor_index(&self, name: &str) -> Option<usize> {
        self.tensors.iter().position(|t| t.name == name)
    }

    /// One line: name, tensors, parameters, size, FLOPs, input, variant.
    pub fn summary_line(&self) -> String {
        format!(
            "{:<16} {:>4} tensors {:>12} params {:>9.1} MiB fp32 {:>9.3} GFLOP/sample fwd  input {:<10} batch {:<4} {}",
            self.name,
            self.tensors.len(),
            self.params(),
            self.fp32_bytes() as f64 / (1024.0 * 1024.0),
            self.fwd_flops_per_sample() / 1e9,
            self.input,
            self.default_batch,
            self.variant
        )
    }

    /// A table of every tensor in registration order with its position in backward
    /// order: `reg bwd name shape params fwd_flops`.
    pub fn layer_table(&self) -> String {
        let n = self.tensors.len();
        let width = self
            .tensors
            .iter()
            .map(|t| t.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# {}: {}; input {}; {} tensors, {} params, {:.3} GFLOP fwd per sample; bwd = position in backward order (reverse registration)",
            self.name,
            self.variant,
            self.input,
            n,
            self.params(),
            self.fwd_flops_per_sample() / 1e9
        );
        let _ = writeln!(
            s,
            "{:>4} {:>4}  {:<width$}  {:<18} {:>11} {:>14}",
            "reg", "bwd", "name", "shape", "params", "fwd_flops"
        );
        for (i, t) in self.tensors.iter().enumerate() {
            let _ = writeln!(
                s,
                "{:>4} {:>4}  {:<width$}  {:<18} {:>11} {:>14.0}",
                i,
                n - 1 - i,
                t.name,
                t.shape_str(),
                t.params(),
                t.fwd_flops
            );
        }
        s
    }
}

/// The zoo's model names.
pub fn names() -> &'static [&'static str] {
    &[
        "resnet20",
        "resnet50",
        "resnet152",
        "vgg16",
        "vgg16-cifar",
        "alexnet",
        "alexnet-caffe",
        "bert-base",
        "bert-large",
        "gpt2-small",
        "lstm-ptb",
        "lstm-ptb-untied",
    ]
}

/// Build a model of the zoo by name.
pub fn build(name: &str) -> Result<Model, ModelError> {
    Ok(match name {
        "resnet20" => resnet::resnet20(),
        "resnet50" => resnet::resnet50(),
        "resnet152" => resnet::resnet152(),
        "vgg16" => vgg::vgg16(),
        "vgg16-cifar" => vgg::vgg16_cifar(),
        "alexnet" => alexnet::alexnet(),
        "alexnet-caffe" => alexnet::alexnet_caffe(),
        "bert-base" => bert::bert_base(),
        "bert-large" => bert::bert_large(),
        "gpt2-small" => gpt2::gpt2_small(),
        "lstm-ptb" => lstm::lstm_ptb(true),
        "lstm-ptb-untied" => lstm::lstm_ptb(false),
        _ => {
            return Err(ModelError::UnknownModel {
                name: crate::units::clip(name),
            })
        }
    })
}

// ---------------------------------------------------------------------------------
// Layer constructors shared by the families. Each appends the layer's parameter
// tensors (in PyTorch registration order: weight, then bias) with their FLOPs.
// ---------------------------------------------------------------------------------

/// Spatial size `(height, width)` of a feature map.
pub(crate) type Hw = (usize, usize);

/// Output size of a convolution or pooling window (dilation 1, floor mode), as in the
/// PyTorch `Conv2d`/`MaxPool2d` docs: `(h + 2·pad − k) / stride + 1`.
pub(crate) fn window_out(hw: Hw, k: usize, stride: usize, pad: usize) -> Hw {
    let f = |x: usize| {
        assert!(
            x + 2 * pad >= k && stride > 0,
            "window {k}/{stride}/{pad} does not fit input {x}"
        );
        (x + 2 * pad - k) / stride + 1
    };
    (f(hw.0), f(hw.1))
}

/// `Conv2d(cin, cout, k, stride, pad, groups, bias)` on an `hw` input; returns the
/// output size. FLOPs: 2 · out_h · out_w · cout · (cin/groups) · k² for the weight,
/// out_h · out_w · cout for the bias.
#[allow(clippy::too_many_arguments)] // PyTorch's Conv2d signature, so layer tables read like the model code
pub(crate) fn conv2d(
    t: &mut Vec<Tensor>,
    name: &str,
    cin: usize,
    cout: usize,
    k: usize,
    stride: usize,
    pad: usize,
    groups: usize,
    bias: bool,
    hw: Hw,
) -> Hw {
    assert!(
        cin % groups == 0 && cout % groups == 0,
        "{name}: channels not divisible by groups"
    );
    let out = window_out(hw, k, stride, pad);
    let positions = (out.0 * out.1) as f64;
    let macs = positions * (cout * (cin / groups) * k * k) as f64;
    t.push(Tensor::new(
        format!("{name}.weight"),
        &[cout, cin / groups, k, k],
        2.0 * macs,
    ));
    if bias {
        t.push(Tensor::new(
            format!("{name}.bias"),
            &[cout],
            positions * cout as f64,
        ));
    }
    out
}

/// `Linear(fin, fout, bias)` applied at `positions` positions per sample (1 for an
/// image classifier, the sequence length for a token-wise layer). FLOPs: 2·fin·fout
/// per position for the weight, fout for the bias.
pub(crate) fn linear(
    t: &mut Vec<Tensor>,
    name: &str,
    fin: usize,
    fout: usize,
    bias: bool,
    positions: usize,
) {
    let p = positions as f64;
    t.push(Tensor::new(
        format!("{name}.weight"),
        &[fout, fin],
        2.0 * p * (fin * fout) as f64,
    ));
    if bias {
        t.push(Tensor::new(
            format!("{name}.bias"),
            &[fout],
            p * fout as f64,
        ));
    }
}

/// Hugging Face `Conv1D(nf=fout, nx=fin)` (GPT-2): a linear layer whose weight is stored
/// `[fin, fout]`; same FLOPs as [`linear`].
pub(crate) fn conv1d_hf(
    t: &mut Vec<Tensor>,
    name: &str,
    fin: usize,
    fout: usize,
    positions: usize,
) {
    let p = positions as f64;
    t.push(Tensor::new(
        format!("{name}.weight"),
        &[fin, fout],
        2.0 * p * (fin * fout) as f64,
    ));
    t.push(Tensor::new(
        format!("{name}.bias"),
        &[fout],
        p * fout as f64,
    ));
}

/// FLOPs per normalised element attributed to a norm layer's weight (statistics,
/// normalise, scale) and bias (shift).
const NORM_WEIGHT_FLOPS: f64 = 4.0;
const NORM_BIAS_FLOPS: f64 = 1.0;

/// `BatchNorm2d(c)` on a `c × hw` feature map: weight and bias `[c]`.
pub(crate) fn batchnorm(t: &mut Vec<Tensor>, name: &str, c: usize, hw: Hw) {
    let elems = (c * hw.0 * hw.1) as f64;
    t.push(Tensor::new(
        format!("{name}.weight"),
        &[c],
        NORM_WEIGHT_FLOPS * elems,
    ));
    t.push(Tensor::new(
        format!("{name}.bias"),
        &[c],
        NORM_BIAS_FLOPS * elems,
    ));
}

/// `LayerNorm(dim)` over `positions` positions: weight and bias `[dim]`.
pub(crate) fn layernorm(t: &mut Vec<Tensor>, name: &str, dim: usize, positions: usize) {
    let elems = (dim * positions) as f64;
    t.push(Tensor::new(
        format!("{name}.weight"),
        &[dim],
        NORM_WEIGHT_FLOPS * elems,
    ));
    t.push(Tensor::new(
        format!("{name}.bias"),
        &[dim],
        NORM_BIAS_FLOPS * elems,
    ));
}

/// `Embedding(vocab, dim)` looked up at `positions` positions. A lookup is a gather
/// (0 FLOPs); `added` embeddings (position, token type) are summed into the hidden
/// state at one FLOP per element.
pub(crate) fn embedding(
    t: &mut Vec<Tensor>,
    name: &str,
    vocab: usize,
    dim: usize,
    positions: usize,
    added: bool,
) {
    let flops = if added { (positions * dim) as f64 } else { 0.0 };
    t.push(Tensor::new(format!("{name}.weight"), &[vocab, dim], flops));
}

/// Layer `l` of a PyTorch `nn.LSTM(input, hidden)` run for `steps` time steps:
/// `weight_ih_l{l}` `[4h, in]`, `weight_hh_l{l}` `[4h, h]`, `bias_ih_l{l}` `[4h]`,
/// `bias_hh_l{l}` `[4h]`. FLOPs per step: 2·4h·in, 2·4h·h, 4h, 4h.
pub(crate) fn lstm_layer(
    t: &mut Vec<Tensor>,
    name: &str,
    l: usize,
    input: usize,
    hidden: usize,
    steps: usize,
) {
    let s = steps as f64;
    let g = 4 * hidden;
    t.push(Tensor::new(
        format!("{name}.weight_ih_l{l}"),
        &[g, input],
        2.0 * s * (g * input) as f64,
    ));
    t.push(Tensor::new(
        format!("{name}.weight_hh_l{l}"),
        &[g, hidden],
        2.0 * s * (g * hidden) as f64,
    ));
    t.push(Tensor::new(
        format!("{name}.bias_ih_l{l}"),
        &[g],
        s * g as f64,
    ));
    t.push(Tensor::new(
        format!("{name}.bias_hh_l{l}"),
        &[g],
        s * g as f64,
    ));
}

/// Add `flops` to the tensor called `name` (used to attribute parameter-free matmuls:
/// attention scores/context, tied output projections).
pub(crate) fn attribute(t: &mut [Tensor], name: &str, flops: f64) {
    let x = t
        .iter_mut()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no tensor {name}"));
    x.fwd_flops += flops;
}

#[cfg(test)]
mod tests;
