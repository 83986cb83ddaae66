"""scripts/check_layers.py's lexing (issues 49 and 51): what it takes as a string, char
literal or comment before it looks for `crate::X` paths. An import after a literal on the
same line, or after a string that spans lines, must still be seen (an upward one fails the
check); a path inside a literal or comment is not an import. Each case lists the exact
code the scanner must keep, written out by hand; the parser's paths (path_at over the
tokens) must agree with the lexer's view (code_lines)."""
import importlib.util
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"
spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
CL = importlib.util.module_from_spec(spec)
spec.loader.exec_module(CL)

def paths(text):
    """[(line, module)] of the crate:: paths the scanner keeps in TEXT."""
    return [(n, m.group(1)) for n, code in CL.code_lines(text) for m in CL.PATH.finditer(code)]


def parsed(text):
    """[(line, module)] of the `crate::X` paths the parser finds in TEXT's tokens."""
    toks = [t for t in CL.tokens(text) if t.kind != "comment"]
    out, i = [], 0
    while i < len(toks):
        p = CL.path_at(toks, i)
        if p and p[0][0] == "crate":
            out.append((toks[i].line, p[0][1]))
        i = p[1] if p else i + 1
    return out


@pytest.mark.parametrize("line", [
    'let s = "a\\"b"; let _ = crate::bench::x;',        # an escaped quote inside a string
    'let s = "a\\\\"; let _ = crate::bench::x;',        # an escaped backslash just before the closing quote
    'let s = "\\\\\\""; let _ = crate::bench::x;',      # \\ then \" : still one string
    "if c == '\"' { let _ = crate::bench::x; }",       # a quote in a char literal opens no string
    "if c == '\\'' || c == '\\\"' { crate::bench::x }",  # escaped quotes in char literals
    "let b = b'\"'; crate::bench::x",                   # a byte char literal
    'let p = r"C:\\"; let _ = crate::bench::x;',        # a raw string has no escapes
    'let p = r#"say "hi"#; crate::bench::x',            # a raw string with a quote inside
    'let p = br"\\"; crate::bench::x',                  # a raw byte string
    "fn f<'a>(x: &'a str) -> &'a str { crate::bench::x(x) }",  # lifetimes are not char literals
    "let s = \"//\"; crate::bench::x",                  # a // inside a string is no comment
    "/* a */ crate::bench::x /* b */",
    'let p = cr#"\\"#; crate::bench::x',                # a raw C string: no escapes (issue 51)
    'let p = c"a\\\\"; crate::bench::x',                # a C string ending in an escaped backslash
    'let p = br##"a"# b"##; crate::bench::x',           # fewer #s than opened do not close
    "let c = '\\u{1F600}'; crate::bench::x",            # a unicode escape
    "let c = '\U0001F980'; crate::bench::x",             # a char beyond the BMP
    "'outer: loop { break 'outer; } crate::bench::x",   # labels are not char literals
    "fn f<'a, 'b: 'a>(x: &'a u8) -> char { crate::bench::x('\\'') }",
])
def test_a_path_after_a_literal_on_its_line_is_seen(line):
    assert paths(line) == [(1, "bench")]
    assert parsed(line) == [(1, "bench")]


@pytest.mark.parametrize("text", [
    'const S: &str = "crate::bench";',
    'const S: &str = "a\\" crate::bench";',             # after an escaped quote, still in the string
    "/// see [`crate::bench`]",
    "// crate::bench",
    "/* crate::bench */",
    "/* outer /* inner */ crate::bench */",             # block comments nest
    'let s = r#"a "crate::bench" b"#;',
    "let s = \"first line\\\n    crate::bench in the message\";",    # a string spanning lines
    'let s = cr#"crate::bench"#;',
    'let s = br##"a"# crate::bench"##;',
    "let s = b\"\\\" crate::bench\";",                  # an escaped quote in a byte string
])
def test_a_path_inside_a_literal_or_comment_is_not_an_import(text):
    assert paths(text) == []
    assert parsed(text) == []


def test_strings_and_comments_spanning_lines_keep_line_numbers():
    text = "\n".join([
        'let msg = "starts here',               # 1: the string runs on
        '  and ends here"; crate::bench::a;',   # 2: the path after its end is code
        "/* a block",                           # 3
        "   crate::comm::b",                    # 4: in the comment
        "*/ crate::sim::c;",                    # 5
        'let r = r#"',                          # 6: a raw string over lines
        '  "crate::cli" crate::cli::d',         # 7
        '"#; crate::measure::e',                # 8
    ])
    assert paths(text) == [(2, "bench"), (5, "sim"), (8, "measure")]
    assert parsed(text) == [(2, "bench"), (5, "sim"), (8, "measure")]
    assert [n for n, _ in CL.code_lines(text)] == list(range(1, 9))


def copy_tree(tmp_path):
    shutil.copytree(ROOT / "src", tmp_path / "src")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", tmp_path / "docs")
    return tmp_path


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True)


@pytest.mark.parametrize("line", [
    'fn up() { let _s = "a\\"b"; let _ = crate::bench::check::x; }',
    "fn up(c: char) -> bool { c == '\"' && crate::bench::check::x() }",
])
def test_the_script_fails_an_upward_import_after_a_literal(tmp_path, line):
    root = copy_tree(tmp_path)
    f = root / "src" / "measure" / "stats.rs"
    n = len(f.read_text().splitlines()) + 2
    f.write_text(f.read_text() + "\n" + line + "\n")
    p = check(root)
    assert p.returncode == 1, p.stdout
    m, b = CL.LAYERS.index("measure"), CL.LAYERS.index("bench")
    assert f"src/measure/stats.rs:{n}: measure (layer {m}) uses bench (layer {b})" in p.stderr
