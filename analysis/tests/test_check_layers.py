"""scripts/check_layers.py: the repository passes, and a tree with an upward import, a
module missing from the layer list, or a docs table that differs from the code fails."""
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)],
                          capture_output=True, text=True)


def copy_tree(tmp_path):
    shutil.copytree(ROOT / "src", tmp_path / "src")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", tmp_path / "docs")
    return tmp_path


def test_the_repository_points_down():
    p = check(ROOT)
    assert p.returncode == 0, p.stderr
    assert "all pointing down" in p.stdout


def test_an_upward_import_fails_with_its_line(tmp_path):
    root = copy_tree(tmp_path)
    f = root / "src" / "measure" / "stats.rs"
    f.write_text(f.read_text() + "\nfn up() { let _ = crate::bench::check::x; }\n")
    p = check(root)
    assert p.returncode == 1
    assert "src/measure/stats.rs:" in p.stderr and "measure (layer 1) uses bench" in p.stderr


def test_comments_and_strings_are_not_imports(tmp_path):
    root = copy_tree(tmp_path)
    f = root / "src" / "measure" / "stats.rs"
    f.write_text(f.read_text() + '\n/// see [`crate::bench`]\nconst S: &str = "crate::bench";\n')
    assert check(root).returncode == 0


def test_a_module_without_a_layer_is_a_usage_error(tmp_path):
    root = copy_tree(tmp_path)
    (root / "src" / "newthing.rs").write_text("pub fn f() {}\n")
    p = check(root)
    assert p.returncode == 2 and "newthing" in p.stderr


def test_the_docs_table_must_match_the_code(tmp_path):
    root = copy_tree(tmp_path)
    doc = root / "docs" / "architecture.md"
    text = doc.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 9 | `netmodel` |"))
    doc.write_text(text.replace(row, row.replace("| measure, record |", "| measure, record, comm |")))
    p = check(root)
    assert p.returncode == 1
    assert "netmodel's 'uses' differs from the code" in p.stderr and "['comm']" in p.stderr
