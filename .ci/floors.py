"""Checks that an environment holds the floors of the project's direct dependencies.

Run it with the python of an environment made by ``uv pip install --resolution lowest-direct``:
every requirement of ``[project.dependencies]`` (or, given names, of those extras) that applies
to this interpreter must be installed at exactly its lower bound (``>=X``). A newer
version means some other requirement lifts that floor, so the floor is not what the tests that
follow prove: the check fails and says which.

    .venv-lowest/bin/python .ci/floors.py            # the runtime dependencies
    .venv-lowest/bin/python .ci/floors.py llm        # the llm extra's

(An extra may lift a runtime dependency above its floor: that one is proven without the extra.)
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # .ci/run installs tomli beside the test tools there
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def floor(requirement: Requirement) -> Version | None:
    """The lowest version ``requirement`` allows (None: it states no lower bound)."""
    bounds = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    return max(bounds) if bounds else None


def main(extras: list[str]) -> int:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extras = [extra for extra in extras if extra]
    lines = [line for extra in extras for line in project["optional-dependencies"][extra]]
    if not extras:
        lines = list(project["dependencies"])
    wrong = []
    for line in lines:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        lowest = floor(requirement)
        if lowest is None:
            continue
        try:
            installed = Version(version(requirement.name))
        except PackageNotFoundError:
            installed = None
        mark = "ok" if installed == lowest else "NOT THE FLOOR"
        print(f"  {requirement.name:<20} floor {lowest!s:<10} installed {installed!s:<10} {mark}")
        if installed != lowest:
            wrong.append(requirement.name)
    if wrong:
        print(f"not installed at their floors: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
