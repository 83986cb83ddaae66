"""Numbers the papers published, with their citations (source: docs/methods.md).

Tables show them beside gradcomp's measurements in columns marked "(published)". They
come from different hardware and, for Marsit and OMGS, from end-to-end training time
rather than one iteration, so they are context, not expected values.
"""

CITATIONS = {
    "acpsgd": "Zhang et al., ACP-SGD (alternate compressed Power-SGD), ICDCS 2023",
    "dgc": "Lin et al., Deep Gradient Compression, ICLR 2018",
    "omgs": "Shi et al., OMGS-SGD (optimal merged gradient sparsification), INFOCOM 2020",
    "marsit": "Wu et al., Marsit (sign bits through multi-hop all-reduce), 2022",
    "sketch": "Dai et al., Sketch-Fusion SGD, JPDC 2024",
}

# ACP-SGD: average speedups over 8-64 GPUs and 1 Gb/s Ethernet to 100 Gb/s InfiniBand.
ACPSGD_SPEEDUP = {"ssgd": 4.06, "powersgd": 1.43}
# ACP-SGD main setup: model -> (per-worker batch, Power-SGD/ACP rank), 32 GPUs.
ACPSGD_MAIN_SETUP = {"resnet50": (64, 4), "resnet152": (32, 4), "bert-base": (32, 32), "bert-large": (8, 32)}
ACPSGD_METHODS = ["ssgd", "signsgd", "topk", "powersgd", "acpsgd"]

# DGC: fp32 gradient size -> DGC message size (the paper's "MB" are MiB: ResNet-50's
# 25,557,032 parameters are 97.49 MiB). zoo = gradcomp's model, None if not in the zoo.
DGC = [
    # paper name, zoo model, gradient MB, message MB, ratio
    ("ResNet-50", "resnet50", 97.49, 0.35, 277.0),
    ("AlexNet", "alexnet-caffe", 232.56, 0.39, 597.0),
    ("LSTM (2-layer, PTB)", "lstm-ptb", 194.68, 0.42, 462.0),
    ("DeepSpeech", None, 488.08, 0.74, 608.0),
]

# OMGS-SGD: up to 31% faster than layer-wise sparsified SGD (16 GPUs, 1 GbE, rho = 0.001).
OMGS_IMPROVEMENT_PCT = 31.0
# The OMGS headline per network (scripts/paper_scale.sh): headline -> (network preset,
# what it is). omgs-1gbe: the paper's cluster from its published measured all-gather and
# all-reduce models (HKBU-HPML/OMGS-SGD utils.py @ac10b98; src/sim/accuracy/published.rs).
OMGS_NETWORKS = {"omgs": ("1gbe", "our 1 GbE preset"),
                 "omgs-net": ("omgs-1gbe", "the paper's measured 1 GbE")}
# Marsit: up to 35% less training time than without compression (at equal accuracy).
MARSIT_REDUCTION_PCT = 35.0
# Sketch-Fusion: up to 18.6% faster training on 16 GPUs; LayerFusion improves other
# methods' scalability by up to 2.87x.
SKETCH_FASTER_PCT = 18.6
SKETCH_LAYERFUSION_SCALABILITY = 2.87


def cite(key: str) -> str:
    return f"Paper: {CITATIONS[key]}."


# Paper scale (simulated): each headline's published setup, as scripts/paper_scale.sh
# simulates it. `ranks_per_node`: GPUs per node sharing one NIC (None: not recorded in
# docs/ or here). `gpu`: the paper's GPU where the paper or its repository names it (the
# script prices its device compression on that preset); None: not named in the seed's
# abstract, priced on v100, the device the bench configs emulate. Where the setup is not
# recorded the script's choice is named in `ours`.
PAPER_SCALE = {
    "acpsgd-main": {"paper": "acpsgd", "gpu": None, "ranks_per_node": 4,
                    "setup": "32 GPUs (8 nodes x 4), ResNet-50/152, BERT-Base/Large, 25 MiB fusion, "
                             "1 GbE / 10 GbE / 100 Gb/s IB",
                    "ours": "32 workers, the 4 models at their paper batch and rank, 25 MiB, best of pipelining "
                            "off/on, 1gbe / 10gbe / 100gb-ib"},
    "acpsgd-scaling": {"paper": "acpsgd", "gpu": None, "ranks_per_node": 4,
                       "setup": "8-64 GPUs, nodes of 4; ACP-SGD consistently faster than the baselines",
                       "ours": "8/16/32/64 workers, the 4 models, 10gbe (the figure's network not recorded)"},
    "omgs": {"paper": "omgs", "gpu": "Nvidia P102-100 (HKBU-HPML/OMGS-SGD @ac10b98, utils.py)", "ranks_per_node": None,
             "setup": "16 GPUs, 1 GbE, rho = 0.001, VGG-16 / ResNet-50 / AlexNet / LSTM-PTB",
             "ours": "16 workers, 1gbe, rho 0.001, the 4 models, pipelining on; layer-wise Top-k = fusion none"},
    "omgs-net": {"paper": "omgs", "gpu": "Nvidia P102-100 (HKBU-HPML/OMGS-SGD @ac10b98, utils.py)",
                 "ranks_per_node": None,
                 "setup": "16 GPUs, 1 GbE as the paper measured it (its all-gather and all-reduce models, "
                          "HKBU-HPML/OMGS-SGD utils.py @ac10b98), rho = 0.001, the same 4 models",
                 "ours": "as `omgs`, on the network preset omgs-1gbe (those published models) instead of 1gbe"},
    "marsit": {"paper": "marsit", "gpu": None, "ranks_per_node": None,
               "setup": "workers and network not recorded here",
               "ours": "16 workers (the marsit bench config), 10gbe, ResNet-50 / VGG-16 / BERT-Base"},
    "sketch-fusion": {"paper": "sketch", "gpu": None, "ranks_per_node": None,
                      "setup": "16 GPUs (network not recorded here)",
                      "ours": "16 workers, 10gbe, ResNet-50 / VGG-16 / BERT-Base, sketch (none) vs "
                              "sketch-fusion (layerfusion)"},
    "sketch-scaling": {"paper": "sketch", "gpu": None, "ranks_per_node": None,
                       "setup": "8-64 GPUs; LayerFusion improves scalability by up to 2.87x",
                       "ours": "8-64 workers, 10gbe, ssgd/signsgd/topk/powersgd/sketch, none vs layerfusion"},
    "dgc": {"paper": "dgc", "gpu": None, "ranks_per_node": None,
            "setup": "gradient vs message size at density 0.001",
            "ours": "resnet50 / alexnet-caffe / lstm-ptb, fusion none, density 0.001"},
}
# The ACP-SGD table of the paper-scale section: the networks, in the paper's order.
ACPSGD_NETWORKS = ["1gbe", "10gbe", "100gb-ib"]
