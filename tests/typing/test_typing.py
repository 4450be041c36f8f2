"""The SDK's static types, as a user's type checker sees them: strict mypy accepts the typed
usage in ``good.py`` and reports exactly the errors marked in ``bad.py``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# Slow: runs mypy in a subprocess; the CI gate (python -m mypy) checks good.py too.
pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

# `<path>:<line>: error: <message>  [<code>]`
_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")
# A trailing `# E: [code] [code] ...` marks a line that must fail with those codes.
_MARK = re.compile(r"#\s*E:\s*(?P<codes>(?:\[[a-z-]+\]\s*)+)$")


def mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            "pyproject.toml",
            "--cache-dir",
            str(cache),
            "--no-error-summary",
            "--hide-error-context",
            str(path.relative_to(ROOT)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def errors(output: str, path: Path) -> set[tuple[int, str]]:
    """The (line, code) of each error mypy reported in ``path``."""
    found = set()
    name = path.relative_to(ROOT).as_posix()
    for line in output.splitlines():
        m = _ERROR.match(line)
        if m and Path(m["path"]).as_posix() == name:
            found.add((int(m["line"]), m["code"]))
    return found


def marked(path: Path) -> set[tuple[int, str]]:
    """The (line, code) pairs ``path`` marks as expected errors."""
    expected = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        m = _MARK.search(line)
        if m:
            expected |= {(number, code) for code in re.findall(r"\[([a-z-]+)\]", m["codes"])}
    return expected


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_typed_usage_passes_strict_mypy(cache: Path) -> None:
    result = mypy(HERE / "good.py", cache)
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_misuse_is_reported_with_its_error_code(cache: Path) -> None:
    bad = HERE / "bad.py"
    expected = marked(bad)
    assert len(expected) >= 20  # the markers were read
    result = mypy(bad, cache)
    assert result.returncode == 1, result.stdout + result.stderr
    reported = errors(result.stdout, bad)
    assert sorted(reported - expected) == [], "reported but not marked"
    assert sorted(expected - reported) == [], "marked but not reported"
