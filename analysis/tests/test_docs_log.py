"""Issue 51 item 4: docs/performance.md and docs/methods.md open with a reader's summary, and
their measurement history lives in dated logs under docs/log/ that the reference links to.

Nothing measured may be lost in a move: each fixture tests/fixtures/docs_tables_REV.txt holds
every Markdown table row with a digit in the two docs as they stood at revision REV (813ba3b:
before the first move; ef84c06: before the second, which also moved the per-run tables into
docs/log/2026-11-29-*), and each row must still appear, after whitespace normalisation, in some
Markdown file under docs/ (docs/*.md or docs/log/*.md). Every relative link from the docs into
docs/log/, and every relative link in the two docs and their history logs, must resolve,
anchors included.

Regenerate a fixture (needs the git history):
    python analysis/tests/test_docs_log.py --write-fixture REV
"""

import glob
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DOCS = os.path.join(ROOT, "docs")
LOG = os.path.join(DOCS, "log")
# The revisions whose figure tables must all be kept: before each move of history out of the docs.
SNAPSHOTS = ("813ba3b", "ef84c06")


def fixture_path(rev):
    return os.path.join(HERE, "fixtures", f"docs_tables_{rev}.txt")


SOURCES = ("docs/performance.md", "docs/methods.md")
# The first heading of each doc's reference part: the reader's opening is everything above it.
FIRST_REFERENCE_HEADING = {
    "docs/performance.md": "## micro-comm vs a bare MPI_Allreduce loop",
    "docs/methods.md": "## The `Compressor` contract",
    # The device model's reference, moved out of the two at ef84c06, opens the same way.
    "docs/device.md": "## Device kernels",
}
OPENING_MAX_LINES = 150
# The logs issue 51 item 4 moved the two docs' history into; each doc links each of its logs.
HISTORY_LOGS = {
    "docs/performance.md": ("docs/log/2026-11-28-performance-history.md", "docs/log/2026-11-29-performance-history.md"),
    "docs/methods.md": ("docs/log/2026-11-28-methods-history.md", "docs/log/2026-11-29-methods-history.md"),
}


def normalise(line):
    """A line with its whitespace collapsed: indentation and column padding do not count."""
    return " ".join(line.split())


def table_rows(text):
    """Every Markdown table row of `text` (a line that starts and ends with `|`) that holds a
    digit, normalised, in order, each once. Rule rows (`|---|`) and most header rows have none."""
    rows, seen = [], set()
    for line in text.splitlines():
        s = normalise(line)
        if s.startswith("|") and s.endswith("|") and re.search(r"[0-9]", s) and s not in seen:
            seen.add(s)
            rows.append(s)
    return rows


def read_fixture(rev):
    """[(source, row)] and the header's declared counts {source: n}."""
    rows, counts = [], {}
    with open(fixture_path(rev), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"# rows (\S+) (\d+)$", line)
            if m:
                counts[m.group(1)] = int(m.group(2))
            elif line and not line.startswith("#"):
                source, row = line.split("\t", 1)
                rows.append((source, row))
    return rows, counts


def write_fixture(rev):
    path = fixture_path(rev)
    per_source = {}
    for source in SOURCES:
        text = subprocess.run(
            ["git", "show", f"{rev}:{source}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        per_source[source] = table_rows(text)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# Every Markdown table row with a digit in {', '.join(SOURCES)} at revision {rev},\n")
        f.write("# whitespace-normalised (tests/test_docs_log.py; regenerate with --write-fixture).\n")
        for source in SOURCES:
            f.write(f"# rows {source} {len(per_source[source])}\n")
        for source in SOURCES:
            for row in per_source[source]:
                f.write(f"{source}\t{row}\n")


def current_texts():
    """{relative path: text} of every docs/*.md and docs/log/*.md."""
    paths = sorted(glob.glob(os.path.join(DOCS, "*.md"))) + sorted(glob.glob(os.path.join(LOG, "*.md")))
    return {os.path.relpath(p, ROOT): open(p, encoding="utf-8").read() for p in paths}


def missing_rows(rows, texts):
    """The fixture rows that no line of `texts` (after normalisation) equals."""
    lines = {normalise(line) for text in texts.values() for line in text.splitlines()}
    return [(source, row) for source, row in rows if row not in lines]


def _strip_fences(text):
    """`text` with the lines inside ``` fences blanked (a `#` there is a shell comment)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def slug(heading):
    """GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(text):
    """Every heading anchor of a Markdown text, duplicates numbered as GitHub numbers them."""
    found, counts = set(), {}
    for line in _strip_fences(text):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(text):
    """The targets of the inline Markdown links outside code fences and code spans."""
    out = []
    for line in _strip_fences(text):
        line = re.sub(r"`[^`]*`", "", line)
        out.extend(LINK.findall(line))
    return out


def broken_links(path, only_into_log=False):
    """The relative links of `path` that do not resolve: a missing file, or an anchor the target
    Markdown file does not have. With only_into_log, only links naming a file under docs/log/."""
    text = open(path, encoding="utf-8").read()
    bad = []
    for target in links(text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if only_into_log and (not file_part or not resolved.startswith(LOG + os.sep)):
            continue
        if not os.path.exists(resolved):
            bad.append(f"{os.path.relpath(path, ROOT)}: {target} (no such file)")
        elif anchor and resolved.endswith(".md"):
            if anchor not in anchors(open(resolved, encoding="utf-8").read()):
                bad.append(f"{os.path.relpath(path, ROOT)}: {target} (no such heading)")
    return bad


def cells_of(row):
    """The cells of a Markdown table row (an escaped `\\|` stays inside its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip()[1:-1])]


@pytest.mark.parametrize("rev", SNAPSHOTS)
def test_fixture_holds_the_snapshot(rev):
    rows, counts = read_fixture(rev)
    assert set(counts) == set(SOURCES)
    for source in SOURCES:
        assert counts[source] == sum(1 for s, _ in rows if s == source) > 0
    # Each snapshot's figure tables, one row of each kind as a spot check.
    assert ("docs/performance.md", "| 16MiB | 9.49 ms | 9.19 ms | 1.033 | yes | 6% | 10% |") in rows
    if rev == "813ba3b":
        assert any(s == "docs/methods.md" and row.startswith("| `sketch-fusion` | 650, 550, 550") for s, row in rows)
    else:
        assert ("docs/methods.md", "| `marsit` | -, 800, 750 (1.16) |") in rows
        assert any(s == "docs/performance.md" and "zen4-epyc-2vcpu-7rounds-j" in row for s, row in rows)


@pytest.mark.parametrize("rev", SNAPSHOTS)
def test_every_table_row_of_the_snapshot_is_kept(rev):
    rows, _ = read_fixture(rev)
    missing = missing_rows(rows, current_texts())
    assert not missing, f"table rows of {rev} lost from docs/:\n" + "\n".join(f"{s}: {r}" for s, r in missing)


@pytest.mark.parametrize("rev", SNAPSHOTS)
def test_a_dropped_row_is_caught(rev):
    """The check fails when a figure table loses a row (here: every copy of one row removed)."""
    rows, _ = read_fixture(rev)
    texts = current_texts()
    for dropped in (rows[0][1], rows[len(rows) // 2][1], rows[-1][1]):
        cut = {
            p: "\n".join(line for line in t.splitlines() if normalise(line) != dropped)
            for p, t in texts.items()
        }
        assert [r for _, r in missing_rows(rows, cut)] == [dropped]


def test_links_into_docs_log_resolve():
    sources = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(DOCS, "*.md")))
    sources += sorted(glob.glob(os.path.join(LOG, "*.md")))
    bad = [b for p in sources for b in broken_links(p, only_into_log=True)]
    assert not bad, "\n".join(bad)
    # Each of the two docs links each of its history logs.
    for source, logs in HISTORY_LOGS.items():
        text = open(os.path.join(ROOT, source), encoding="utf-8").read()
        for log in logs:
            assert any(t.split("#")[0] == "log/" + os.path.basename(log) for t in links(text)), (source, log)


def test_relative_links_of_the_docs_and_their_history_logs_resolve():
    paths = [os.path.join(ROOT, s) for s in list(SOURCES) + ["docs/device.md"]]
    paths += [os.path.join(ROOT, log) for logs in HISTORY_LOGS.values() for log in logs]
    bad = [b for p in paths for b in broken_links(p)]
    assert not bad, "\n".join(bad)


def test_a_broken_log_link_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](../docs/log/no-such-log.md) [b](#nowhere)\n# Here\n[c](#here)\n")
    assert len(broken_links(str(page))) == 2


def test_openings_are_a_readers_summary():
    """Under 150 lines to the first reference section, with one table of today's figures whose
    every row names a date and a revision."""
    for source, first in FIRST_REFERENCE_HEADING.items():
        lines = open(os.path.join(ROOT, source), encoding="utf-8").read().splitlines()
        assert first in lines, (source, first)
        opening = lines[: lines.index(first)]
        assert len(opening) < OPENING_MAX_LINES, (source, len(opening))
        start = next(i for i, l in enumerate(opening) if l.startswith("## Today's figures"))
        table = [l for l in opening[start:] if l.startswith("|")]
        header = [c.strip().lower() for c in table[0].strip("|").split("|")]
        for col in ("command", "date", "machine", "revision"):
            assert col in header, (source, col)
        for row in table[2:]:
            cells = cells_of(row)
            assert re.search(r"20\d\d-\d\d-\d\d", cells[header.index("date")]), (source, row)
            assert re.search(r"\b[0-9a-f]{7}\b", cells[header.index("revision")]), (source, row)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-fixture":
        write_fixture(sys.argv[2])
        print(f"wrote {fixture_path(sys.argv[2])}")
    else:
        sys.exit(__doc__)
