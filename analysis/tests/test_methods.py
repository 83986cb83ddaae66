"""gradcomp_analysis.methods: gradcomp's method descriptions (analysis/methods.json, the
output of `gradcomp methods --json`; tests/methods_json.rs checks the copy), read by name,
variant and control. References are the papers' facts, written again here."""

import json

from gradcomp_analysis import methods as M


def test_names_variants_and_controls_resolve_to_their_method():
    assert M.METHODS[:4] == ["ssgd", "signsgd", "signsgd-mv", "topk"]
    assert M.base("omgs") == "topk" and M.base("sketch-fusion") == "sketch"
    assert M.base("topk-noef") == "topk" and M.base("nope") is None
    assert not M.reads("nope", "density")
    assert M.reads("omgs", "density") and not M.reads("ssgd", "density")
    assert M.readers("rank") == ["powersgd", "acpsgd"]
    assert "sketch-fusion" in M.readers("density", variants=True)
    assert "sketch-fusion" not in M.readers("density")


def test_defaults_rounds_and_aggregation():
    # DGC's 0.1% (Lin et al. 2018), FetchSGD's 0.0076, powerSGD_hook's rate 2, ACP-SGD 0.
    assert M.default_of("topk", "density") == 0.001 and M.default_of("ssgd", "density") == 0.001
    assert M.default_of("sketch-fusion", "density") == 0.0076
    assert M.default_of("acpsgd", "min_compression_rate") == 0.0
    assert M.default_of("topk", "min_compression_rate") == 2.0
    assert M.default_of("dgc", "momentum") == 0.9 and M.default_of("ssgd", "rank") == 4
    assert M.rounds_phases("powersgd") == (2, 1) and M.rounds_phases("acpsgd") == (1, 2)
    assert M.aggregation("omgs") == "allgather" and M.aggregation("marsit") == "ring"
    assert M.aggregation("ssgd") == "allreduce"


def test_load_reads_a_given_file(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"methods": [], "x": 1}))
    assert M.load(str(p)) == {"methods": [], "x": 1}
