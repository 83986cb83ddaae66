"""analysis/profile_compress.py: the CSV it writes is what src/devcost/profile.rs reads,
shapes from `gradcomp models` listings, argument checks; with torch installed, a tiny CPU
run. The Rust side reads the committed fixture in tests/compress_profile.rs."""

import os
import re

import pytest

import profile_compress as pc
from gradcomp_analysis import tables

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FIXTURE = os.path.join(ROOT, "tests", "data", "compress_profile_resnet20_cpu.csv")


def src(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


# `gradcomp models lstm-ptb`, as the binary prints it.
LSTM_LISTING = """\
# lstm-ptb: 2-layer LSTM-1500 on PTB (vocab 10000), decoder tied to embedding; input seq 35; 10 tensors, 51034000 params, 3.571 GFLOP fwd per sample; bwd = position in backward order (reverse registration)
 reg  bwd  name              shape                   params      fwd_flops
   0    9  encoder.weight    10000x1500            15000000              0
   1    8  rnn.weight_ih_l0  6000x1500              9000000      630000000
   2    7  rnn.weight_hh_l0  6000x1500              9000000      630000000
   3    6  rnn.bias_ih_l0    6000                      6000         210000
   4    5  rnn.bias_hh_l0    6000                      6000         210000
   5    4  rnn.weight_ih_l1  6000x1500              9000000      630000000
   6    3  rnn.weight_hh_l1  6000x1500              9000000      630000000
   7    2  rnn.bias_ih_l1    6000                      6000         210000
   8    1  rnn.bias_hh_l1    6000                      6000         210000
   9    0  decoder.bias      10000                    10000     1050350000
"""


def test_header_is_the_rust_readers():
    m = re.search(r'pub const HEADER: &str = "([^"]+)";', src("src/devcost/profile.rs"))
    assert m, "HEADER not found in src/devcost/profile.rs"
    assert m.group(1) == ",".join(pc.HEADER)
    assert 'pub const COPY: &str = "copy";' in src("src/devcost/profile.rs")


def test_methods_rounds_and_defaults_come_from_gradcomps_description():
    """The script declares no method fact of its own: names, rounds, phases, aggregation and
    defaults come from `gradcomp methods --json` (analysis/methods.json, which
    tests/methods_json.rs checks is the binary's output). The references here are the
    papers' and the reference code's, written again."""
    from gradcomp_analysis import methods as M

    # Every method the script times is gradcomp's, in gradcomp's order.
    assert pc.METHODS == [m for m in M.METHODS if m in pc.METHODS]
    assert {"ssgd", "topk", "powersgd", "acpsgd", "sketch", "qsgd"} <= set(pc.METHODS)
    # Power-SGD: P then Q (Vogels et al. 2019, Alg. 1); ACP-SGD: one factor a step,
    # alternating (Zhang et al. 2023, Sec. IV); Count Sketch: the sketch, then the exact
    # values of its heavy hitters (Ivkin et al. 2019, Alg. 1).
    assert pc.ROUNDS_PHASES["powersgd"] == (2, 1)
    assert pc.ROUNDS_PHASES["acpsgd"] == (1, 2)
    assert pc.ROUNDS_PHASES["sketch"] == (2, 1)
    assert pc.ROUNDS_PHASES["topk"] == (1, 1)
    # (index, value) pairs, signs and codes are gathered; dense and low-rank sums reduced.
    assert {"topk", "dgc", "signsgd", "signsgd-mv", "qsgd"} <= pc.ALLGATHER
    assert not {"ssgd", "powersgd", "acpsgd", "sketch", "marsit"} & pc.ALLGATHER
    # Defaults: DGC's 0.1% (Lin et al. 2018, Sec. 4); FetchSGD's k / d for Count Sketch
    # (50,000 / 6,573,120, kiddyboots216/CommEfficient utils.py's default k); powerSGD_hook's
    # min_compression_rate 2; ACP-SGD compresses every matrix (lzhangbv/acpsgd acpsgd.py:84).
    for method in pc.METHODS:
        want = 0.0076 if method == "sketch" else 0.001
        assert pc.density_of(pc.PARAM_DEFAULTS, method) == want, method
    assert M.default_of("sketch-fusion", "density") == 0.0076
    assert pc.rate_of(pc.PARAM_DEFAULTS, "acpsgd") == 0.0
    assert pc.rate_of(pc.PARAM_DEFAULTS, "powersgd") == 2.0
    assert pc.rate_of(dict(pc.PARAM_DEFAULTS, min_compression_rate=1.5), "acpsgd") == 1.5
    # Count Sketch 2 rows x 10 columns per k: the smallest size that reaches dense in the
    # convergence check (docs/methods.md, "sketch", "Default size").
    assert pc.PARAM_DEFAULTS == {"density": None, "rank": 4, "min_compression_rate": None, "momentum": 0.9,
                                 "nesterov": False, "clip_norm": 0.0, "sketch_rows": 2, "sketch_cols_per_k": 10.0,
                                 "qsgd_levels": 127}
    assert "dgc" in pc.param_help("momentum") and "sketch 0.0076" in pc.param_help("density")
    # The report's table selection prefers the same defaults (tables.defaults).
    assert tables.default_density("sketch") == 0.0076 and tables.default_density("omgs") == 0.001
    assert {"topk", "dgc", "sketch", "omgs", "sketch-fusion"} <= set(tables.SPARSE)
    assert tables.LOW_RANK == ("powersgd", "acpsgd")


def test_a_method_without_a_torch_implementation_is_refused_by_name(monkeypatch):
    """A method gradcomp has but the script cannot time gets its own message."""
    monkeypatch.setattr(pc, "METHODS", [m for m in pc.METHODS if m != "qsgd"])
    a = pc.build_parser().parse_args(["--shapes", "8", "--methods", "qsgd", "--world-size", "2", "--out", "x.csv"])
    with pytest.raises(SystemExit, match="no torch implementation"):
        pc.validate(a)
    a = pc.build_parser().parse_args(["--shapes", "8", "--methods", "omgs", "--world-size", "2", "--out", "x.csv"])
    with pytest.raises(SystemExit, match="profile topk instead"):
        pc.validate(a)


def test_writer_format_round_trips(tmp_path):
    out = tmp_path / "p.csv"
    rows = [
        ("topk", "compress", 0, 0, 64, 147, 4, 1.0 / 3.0),
        ("topk", "decompress", 0, 0, 64, 147, 4, 2.5e-05),
        ("powersgd", "compress", 1, 0, 1, 64, 4, 0.0),
        ("copy", "copy", 0, 0, 1, 1024, 4, 1.2e-06),
    ]
    meta = [("device", "Test GPU"), ("date", "2026-11-25T10:00:00Z"), ("density", 0.001), ("nesterov", False)]
    pc.write_profile(str(out), rows, meta)
    lines = out.read_text().splitlines()
    assert lines[:4] == ["# device: Test GPU", "# date: 2026-11-25T10:00:00Z", "# density: 0.001", "# nesterov: false"]
    assert lines[4] == "method,stage,round,phase,rows,cols,world_size,time_s"
    assert lines[5] == "topk,compress,0,0,64,147,4,0.3333333333333333"
    assert lines[7] == "powersgd,compress,1,0,1,64,4,0.0"
    got_meta, got_rows = pc.read_profile(str(out))
    assert got_rows == rows  # times survive exactly
    assert got_meta["date"] == "2026-11-25T10:00:00Z" and got_meta["nesterov"] == "false"
    with pytest.raises(ValueError, match="7 fields"):
        pc.write_profile(str(out), [rows[0][:7]], [])


def test_committed_fixture_is_in_the_writers_format(tmp_path):
    """tests/data/compress_profile_resnet20_cpu.csv (read by tests/compress_profile.rs) is
    exactly what write_profile produces from its own contents."""
    meta, rows = pc.read_profile(FIXTURE)
    out = tmp_path / "again.csv"
    pc.write_profile(str(out), rows, list(meta.items()))
    with open(FIXTURE) as f:
        assert out.read_text() == f.read()
    assert {r[0] for r in rows} == set(pc.METHODS) | {"copy"}
    assert meta["model"] == "resnet20" and meta["world_size"] == "2"


def test_rows_cols_and_shape_parsing():
    assert pc.rows_cols([64, 3, 7, 7]) == (64, 147)
    assert pc.rows_cols([64]) == (1, 64)
    assert pc.rows_cols([768, 3072]) == (768, 3072)
    assert pc.parse_shape("64x147") == (64, 147)
    assert pc.parse_shape("1000") == (1, 1000)
    assert pc.parse_shape("64x3x7x7") == (64, 147)
    assert pc.parse_shape(" 10X64 ") == (10, 64)
    for bad in ("abc", "0x5", "", "64x", "-3"):
        with pytest.raises(ValueError, match="not a shape"):
            pc.parse_shape(bad)
    assert pc.distinct([(1, 2), (3, 4), (1, 2)]) == [(1, 2), (3, 4)]


def test_parses_gradcomp_models_listing(tmp_path):
    tensors = pc.parse_models_listing(LSTM_LISTING)
    assert len(tensors) == 10
    assert tensors[0] == ("encoder.weight", (10000, 1500))
    assert tensors[3] == ("rnn.bias_ih_l0", (1, 6000))
    assert pc.distinct([rc for _, rc in tensors]) == [(10000, 1500), (6000, 1500), (1, 6000), (1, 10000)]
    with pytest.raises(ValueError, match="without a name lists the zoo"):
        pc.parse_models_listing("resnet20   59 tensors ...\n")
    with pytest.raises(ValueError, match="listing says 7"):
        pc.parse_models_listing(LSTM_LISTING.replace("15000000", "7", 1))
    with pytest.raises(ValueError, match="no tensors"):
        pc.parse_models_listing("# nothing\n")
    listing = tmp_path / "lstm.txt"
    listing.write_text(LSTM_LISTING)
    assert pc.read_shapes_file(str(listing)) == [rc for _, rc in tensors]
    plain = tmp_path / "shapes.txt"
    plain.write_text("# two shapes\n64x147\n\n1000  # a bias\n")
    assert pc.read_shapes_file(str(plain)) == [(64, 147), (1, 1000)]
    plain.write_text("64x147\nwide\n")
    with pytest.raises(ValueError, match="line 2"):
        pc.read_shapes_file(str(plain))


def test_model_shapes_from_the_binary():
    exe = pc.find_gradcomp()
    if not exe:
        pytest.skip("no gradcomp binary (cargo build --release)")
    shapes = pc.model_shapes("resnet20", exe)
    assert len(shapes) == 59 and shapes[0] == (16, 27) and shapes[1] == (1, 16)
    with pytest.raises(SystemExit, match="models nope"):
        pc.model_shapes("nope", exe)


def args(*extra):
    base = ["--shapes", "64x147,10", "--methods", "topk,powersgd", "--world-size", "2", "--out", "x.csv", "--device", "cpu"]
    return pc.build_parser().parse_args(base + list(extra))


def test_argument_validation():
    methods, params, sizes = pc.validate(args())
    assert methods == ["topk", "powersgd"]
    # No density given: each method at its own (none written into the profile).
    assert params["density"] is None and params["rank"] == 4 and params["nesterov"] is False
    assert pc.validate(args("--density", "0.01"))[1]["density"] == 0.01
    assert sizes == [4 ** k for k in range(5, 12)]
    assert pc.validate(args("--copy-sizes", "4096,1024,1024"))[2] == [1024, 4096]
    assert pc.validate(args("--lowrank-rank", "32", "--nesterov"))[1]["rank"] == 32
    # 0 compresses every matrix (ACP-SGD's default); not given, each method its own.
    assert pc.validate(args("--min-compression-rate", "0"))[1]["min_compression_rate"] == 0.0
    assert params["min_compression_rate"] is None
    cases = [
        (("--methods", "topk,nope"), "unknown method 'nope'"),
        (("--methods", "omgs"), "profile topk instead"),
        (("--methods", "sketch-fusion"), "profile sketch instead"),
        (("--methods", "topk,topk"), "repeats"),
        (("--world-size", "0"), "--world-size"),
        (("--iters", "0"), "--iters"),
        (("--warmup", "-1"), "--warmup"),
        (("--density", "0"), "--density 0.0 must be in (0, 1]"),
        (("--density", "1.5"), "--density"),
        (("--lowrank-rank", "0"), "--lowrank-rank"),
        (("--min-compression-rate", "-1"), "--min-compression-rate"),
        (("--min-compression-rate", "nan"), "--min-compression-rate"),
        (("--momentum", "1"), "--momentum"),
        (("--clip-norm", "-1"), "--clip-norm"),
        (("--sketch-rows", "0"), "--sketch-rows"),
        (("--sketch-cols-per-k", "nan"), "--sketch-cols-per-k"),
        (("--qsgd-levels", "0"), "--qsgd-levels"),
        (("--copy-sizes", "1024"), "two or more distinct sizes"),
        (("--copy-sizes", "1024,0"), "two or more distinct sizes"),
        (("--copy-sizes", "1k,2k"), "not a comma list"),
        (("--cpu-threads", "0"), "--cpu-threads"),
    ]
    for extra, msg in cases:
        with pytest.raises(SystemExit, match=re.escape(msg)):
            pc.validate(args(*extra))
    # Missing required arguments and two shape sources are argparse errors (exit 2).
    for argv in (["--methods", "topk", "--world-size", "2", "--out", "x"],
                 ["--model", "resnet20", "--shapes", "4", "--methods", "topk", "--world-size", "2", "--out", "x"],
                 ["--shapes", "4", "--world-size", "2", "--out", "x"]):
        with pytest.raises(SystemExit) as e:
            pc.build_parser().parse_args(argv)
        assert e.value.code == 2
    with pytest.raises(SystemExit, match="not a shape"):
        pc.shapes_of(args("--shapes", "64x147,big"))


def test_module_imports_without_torch():
    """torch is imported inside run() only: the module itself needs the standard library."""
    text = src("analysis/profile_compress.py")
    assert not re.search(r"^import torch|^from torch", text, re.M)


# --- with torch ------------------------------------------------------------------------


def test_tiny_cpu_run(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "cpu.csv"
    rc = pc.main(["--shapes", "16x27,1x16", "--methods", "topk,powersgd", "--world-size", "3", "--device", "cpu",
                  "--iters", "2", "--warmup", "1", "--copy-sizes", "1024,4096", "--out", str(out)])
    assert rc == 0
    meta, rows = pc.read_profile(str(out))
    assert meta["device"].startswith("cpu") and meta["world_size"] == "3" and meta["density"] == "0.001"
    # topk: 2 stages; powersgd: 2 rounds x 2 stages; per shape; plus 2 copy rows.
    assert len(rows) == 2 * 2 + 2 * 4 + 2
    assert all(r[6] == 3 and r[7] >= 0 for r in rows)
    keys = {r[:6] for r in rows}
    assert ("powersgd", "compress", 1, 0, 16, 27) in keys and ("copy", "copy", 0, 0, 1, 4096) in keys
    # Power-SGD sends a 1 x 16 bias raw: round 1 does nothing.
    assert [r[7] for r in rows if r[:6] == ("powersgd", "decompress", 1, 0, 1, 16)] == [0.0]
    assert all(r[7] > 0 for r in rows if r[0] == "topk")


def test_every_method_runs_and_its_kernels_are_right():
    torch = pytest.importorskip("torch")
    dev = torch.device("cpu")
    gen = torch.Generator(device=dev)
    gen.manual_seed(3)
    bits = pc.Bits(torch, dev)
    b = torch.rand(37, generator=gen) < 0.5
    packed = bits.pack(b)
    assert packed.numel() == 5 and torch.equal(bits.unpack(packed, 37).bool(), b)
    # Bit i of byte j is element 8j + i (gradcomp's LSB-first words).
    assert bits.pack(torch.tensor([True] + [False] * 7 + [False, True])).tolist() == [1, 2]
    params = dict(pc.PARAM_DEFAULTS, density=0.05, seed=1)
    timer = pc.Timer(torch, dev)
    for method in pc.METHODS:
        for shape in ((8, 40), (1, 50)):
            case = pc.Case(torch, method, *shape, params, 3, dev, gen)
            times = pc.profile_case(torch, timer, case, 2, 1)
            assert set(times) == set(pc.steps(method)) and all(t >= 0 for t in times.values()), method
    # QSGD codes of b != 8 bits pack and unpack (3 levels: 3-bit codes).
    case = pc.Case(torch, "qsgd", 4, 10, dict(params, qsgd_levels=3), 2, dev, gen)
    assert case.b == 3
    code = torch.randint(0, 8, (40,), generator=gen, dtype=torch.int32)
    assert torch.equal(case._unpack_codes(case._pack_codes(code)), code)
    # Top-k keeps the k largest of g + e and leaves the rest in the residual.
    case = pc.Case(torch, "topk", 10, 10, params, 2, dev, gen)
    g = case.g.view(-1).clone()
    case.op("compress", 0, 0)()
    idx, vals = case.own
    assert len(idx) == 5 and set(idx.tolist()) == set(g.abs().topk(5).indices.tolist())
    assert torch.equal(case.e + torch.zeros(100).index_put_((idx,), vals), g)
    # Power-SGD's P is orthonormal after round 0's decompress, at rank <= 2 and above.
    for rank in (2, 4):
        case = pc.Case(torch, "powersgd", 30, 20, dict(params, rank=rank), 2, dev, gen)
        case.op("compress", 0, 0)()
        case.op("decompress", 0, 0)()
        assert torch.allclose(case.P.T @ case.P, torch.eye(rank), atol=1e-4)
