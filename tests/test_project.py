"""The repository explains itself: its design document exists and every
citation of it resolves, every link between the README and docs/ resolves,
every cited benchmark record exists and the table of records lists each, nothing
depends on files outside the repository, the environment table of
docs/environment.md matches the code, and every declared pytest marker is
used."""

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE_SUFFIXES = {".py", ".h", ".cpp", ".cu", ".sh", ".txt", ".toml", ".md", ""}


def tracked_files():
    """The repository's files (git's list when it has one), results records aside."""
    try:
        names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
        paths = [ROOT / n for n in names]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    return [p for p in paths if p.exists() and p.suffix in SOURCE_SUFFIXES
            and "results" not in p.relative_to(ROOT).parts[:2]]


def design_sections():
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    return set(re.findall(r"^#+ (.+?)\s*$", text, re.M))


def test_every_design_citation_names_a_section_that_exists():
    sections = design_sections()
    cited = []
    for path in tracked_files():
        if path.name == "DESIGN.md":  # it shows the citation form
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for section in re.findall(r'DESIGN\.md, "([^"]+)"', line):
                cited.append((path, number, section))
    assert cited, "no code comment cites docs/DESIGN.md"
    missing = [f"{p.relative_to(ROOT)}:{n}: {s}" for p, n, s in cited if s not in sections]
    assert not missing, "citations of sections docs/DESIGN.md lacks:\n" + "\n".join(missing)


def test_design_citations_name_the_repositorys_document():
    bare = [f"{p.relative_to(ROOT)}:{n}" for p in tracked_files()
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if re.search(r'(?<!docs/)DESIGN\.md, "', line)]
    assert not bare, "cite docs/DESIGN.md by its path:\n" + "\n".join(bare)


def test_the_readme_points_to_the_design():
    assert "docs/DESIGN.md" in (ROOT / "README.md").read_text()


def markdown_links(path):
    """The relative file links of a markdown file: [text](target), anchors dropped."""
    targets = re.findall(r"\]\(([^)\s]+)\)", path.read_text())
    return [t.split("#", 1)[0] for t in targets if "://" not in t and not t.startswith("#")]


def test_every_link_of_the_readme_and_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    links = [(page, target) for page in pages for target in markdown_links(page)]
    assert len(links) > len(pages), "the README and docs/ link to each other"
    broken = [f"{page.relative_to(ROOT)}: {target}" for page, target in links
              if not (page.parent / target).exists()]
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


RESULTS = ROOT / "benchmarks" / "results"


def committed_records():
    """The record folders under benchmarks/results/ (git's list when it has one, so that
    a run written there and not committed is no record yet)."""
    try:
        names = subprocess.run(["git", "ls-files", "benchmarks/results"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.split()
        return {pathlib.PurePosixPath(n).parts[2] for n in names
                if len(pathlib.PurePosixPath(n).parts) > 3}
    except (OSError, subprocess.CalledProcessError):
        return {p.name for p in RESULTS.iterdir() if p.is_dir()}


def test_every_cited_record_exists_and_the_records_table_lists_each():
    """A path under benchmarks/results/ in the README or docs/ names a record there (a
    removed one is named without the path, with the commit that still has it); the
    README's table cites existing records; docs/benchmarks.md's table lists exactly
    the records there are."""
    records = committed_records()
    assert records, "benchmarks/results/ holds records"
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    cited = [(page, name) for page in pages
             for name in re.findall(r"benchmarks/results/([\w.-]+)(?![\w.<-])", page.read_text())]
    cited += [(ROOT / "README.md", name) for name in
              re.findall(r"\| `([\w.-]+)` \|\s*$", (ROOT / "README.md").read_text(), re.M)]
    assert cited, "the README and docs/ cite records"
    missing = [f"{p.relative_to(ROOT)}: {n}" for p, n in cited if n not in records]
    assert not missing, "cited records that benchmarks/results/ lacks:\n" + "\n".join(missing)
    table = set(re.findall(r"^\| `([\w.-]+)` \|", (ROOT / "docs" / "benchmarks.md").read_text(),
                           re.M))
    assert table == records, (f"docs/benchmarks.md's table of records and benchmarks/results/ "
                              f"differ: only in the table {sorted(table - records)}, only in "
                              f"the folder {sorted(records - table)}")


def test_the_readme_links_every_docs_page():
    readme = set(markdown_links(ROOT / "README.md"))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert not pages - readme, f"docs/ pages the README does not link: {sorted(pages - readme)}"


def test_nothing_depends_on_files_outside_the_repository():
    folder = "shared" + "/"  # the workplace folder beside a clone, spelled so this line is no hit
    outside = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in tracked_files()
               if p.relative_to(ROOT).parts[0] != ".ci"
               for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
               if folder in line]
    assert not outside, "\n".join(outside)


# How the code reads an environment variable: Python (os.environ, and
# os.environ.get), C++ (getenv), CMake ($ENV{NAME}), shell (${NAME...} and $NAME).
READS = [r'environ(?:\.get)?\s*[\(\[]\s*["\'](BWDCONV_[A-Z0-9_]+)',
         r'from_environment\(\s*["\'](BWDCONV_[A-Z0-9_]+)',  # bwdconv._settings
         r'getenv\(\s*"(BWDCONV_[A-Z0-9_]+)"',
         r'\$ENV\{(BWDCONV_[A-Z0-9_]+)\}']
SHELL_READ = r'\$\{?(BWDCONV_[A-Z0-9_]+)'


def variables_read():
    found = {}
    for path in tracked_files():
        if path.suffix == ".md" or path.parts[-2:] == ("tests", "test_project.py"):
            continue
        text = path.read_text(errors="replace")
        shell = path.suffix == ".sh" or text.startswith("#!/usr/bin/env bash")
        for pattern in READS + ([SHELL_READ] if shell else []):
            for name in re.findall(pattern, text):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


ENVIRONMENT_DOC = ROOT / "docs" / "environment.md"


def documented_variables():
    """The variables of the table in docs/environment.md (its rows' first cells)."""
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", ENVIRONMENT_DOC.read_text(), re.M))


def test_the_environment_table_lists_every_environment_variable_the_code_reads():
    read = variables_read()
    assert "BWDCONV_STRATEGY" in read and "BWDCONV_VENV" in read  # the patterns find reads
    table = documented_variables()
    missing = sorted(set(read) - table)
    assert not missing, f"read by the code, not in docs/environment.md's table: {missing} ({read})"
    stale = sorted(name for name in table - set(read) if name.startswith("BWDCONV_"))
    assert not stale, f"in docs/environment.md's table, read by no code: {stale}"


def test_the_doctors_meanings_cover_the_documented_variables():
    from bwdconv import _variables

    documented = {name for name in documented_variables() if name.startswith("BWDCONV_")}
    assert documented, "docs/environment.md's table has BWDCONV_ rows"
    assert documented == set(_variables.MEANINGS), (
        "docs/environment.md and bwdconv/_variables.py (MEANINGS) differ: "
        f"{sorted(documented ^ set(_variables.MEANINGS))}")


def test_every_declared_pytest_marker_is_used():
    config = (ROOT / "pyproject.toml").read_text()
    declared = re.findall(r'^\s*"(\w+):', config.split("markers", 1)[1], re.M)
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").glob("*.py"))
    unused = [m for m in declared if f"pytest.mark.{m}" not in tests]
    assert declared and not unused, f"declared and never used: {unused}"
