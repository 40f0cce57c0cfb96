"""Check the built sdists and wheels: what `twine check` does not look at.

    python3 scripts/check_dists.py DIST_DIR

For each workspace package, exactly one sdist and one wheel of its workspace version,
each carrying the license file and the metadata the index shows (license expression,
project URLs, classifiers, a Markdown README); the wheel holds only its own import
package, with its ``py.typed``. Prints one line per distribution; exits 1 on any
problem, listing them all. Stdlib only.
"""

from __future__ import annotations

import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
URLS = {"Documentation", "Changelog", "Source"}
CLASSIFIERS = {"Typing :: Typed", "Programming Language :: Python :: 3 :: Only"}


def _metadata_problems(where: str, meta: Message, version: str) -> list[str]:
    problems = []
    if meta["Version"] != version:
        problems.append(f"{where}: version {meta['Version']}, the workspace has {version}")
    if meta["License-Expression"] != "MIT":
        problems.append(f"{where}: License-Expression is {meta['License-Expression']!r}")
    if meta.get_all("License-File") != ["LICENSE"]:
        problems.append(f"{where}: License-File is {meta.get_all('License-File')}")
    labels = {url.split(",", 1)[0].strip() for url in meta.get_all("Project-URL") or []}
    if missing := URLS - labels:
        problems.append(f"{where}: no Project-URL {sorted(missing)}")
    if missing := CLASSIFIERS - set(meta.get_all("Classifier") or []):
        problems.append(f"{where}: no classifier {sorted(missing)}")
    if not meta["Requires-Python"]:
        problems.append(f"{where}: no Requires-Python")
    if meta["Description-Content-Type"] != "text/markdown":
        problems.append(f"{where}: README type {meta['Description-Content-Type']!r}")
    if len(meta.get_payload()) < 200:  # type: ignore[arg-type]
        problems.append(f"{where}: the long description is missing or a stub")
    return problems


def check_wheel(wheel: Path, package: str, version: str) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (info,) = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
        meta = Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        license_text = (
            zf.read(f"{info}/licenses/LICENSE") if f"{info}/licenses/LICENSE" in names else b""
        )
    problems = _metadata_problems(wheel.name, meta, version)
    tops = {n.split("/", 1)[0] for n in names} - {info}
    if tops != {package}:
        problems.append(f"{wheel.name}: ships {sorted(tops)}, not only {package}")
    if f"{package}/py.typed" not in names:
        problems.append(f"{wheel.name}: no {package}/py.typed")
    if package == "agent_channel_acp":  # the web console, built (packages/acp-producer/web)
        for page in ("index.html", "app.js", "app.css"):
            if f"{package}/hosting/page/{page}" not in names:
                problems.append(f"{wheel.name}: no {package}/hosting/page/{page} (the web console)")
    if license_text.decode() != (ROOT / "LICENSE").read_text():
        problems.append(f"{wheel.name}: {info}/licenses/LICENSE missing or not the repository's")
    return problems


def check_sdist(sdist: Path, version: str) -> list[str]:
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as tf:
        names = set(tf.getnames())
        meta = Parser().parsestr(tf.extractfile(f"{top}/PKG-INFO").read().decode())  # type: ignore[union-attr]
        lic = tf.extractfile(f"{top}/LICENSE") if f"{top}/LICENSE" in names else None
        license_text = lic.read().decode() if lic else ""
    problems = _metadata_problems(sdist.name, meta, version)
    if license_text != (ROOT / "LICENSE").read_text():
        problems.append(f"{sdist.name}: {top}/LICENSE missing or not the repository's")
    for needed in ("pyproject.toml", "README.md", "CHANGELOG.md"):
        if f"{top}/{needed}" not in names:
            problems.append(f"{sdist.name}: no {needed}")
    return problems


def main(dist: Path) -> int:
    problems: list[str] = []
    expected: set[str] = set()
    for pyproject in sorted((ROOT / "packages").glob("*/pyproject.toml")):
        config = tomllib.loads(pyproject.read_text())
        name, version = config["project"]["name"], config["project"]["version"]
        (package,) = [
            Path(p).name for p in config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
        ]
        stem = f"{name.replace('-', '_')}-{version}"
        wheel, sdist = dist / f"{stem}-py3-none-any.whl", dist / f"{stem}.tar.gz"
        expected |= {wheel.name, sdist.name}
        for built in (wheel, sdist):
            if not built.is_file():
                problems.append(f"{built.name}: not built")
                continue
            if built is wheel:
                found = check_wheel(wheel, package, version)
            else:
                found = check_sdist(sdist, version)
            problems += found
            print(f"{'FAIL' if found else 'ok  '} {built.name}")
    if extra := {p.name for p in dist.iterdir() if not p.name.startswith(".")} - expected:
        problems.append(f"{dist}: unexpected files {sorted(extra)}")
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
