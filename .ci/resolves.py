"""Does the project's locked dependency set install on Python 3.12 and 3.13? (`.venv` and the test
suite run on 3.11, the only version whose CPU torch wheel lies on this machine's disk.) The lock,
requirements.lock, is the constraint: the set resolved is the lock's, whatever the registry has
published since, and a package one of these Pythons needs beyond the lock is an error (the venv
installs the lock with --no-deps).

For each version, from pyenv, in a throw-away venv and with `pip install --dry-run` (nothing is
installed, only metadata is fetched; a current pip, which resolves this set twice as fast):
  1. the project itself (`--no-deps .`): its requires-python admits this interpreter;
  2. every dependency and dev extra but torch, resolved together under the lock: no conflict among
     them, and nothing needed beyond the lock;
  3. torch's pinned release has a wheel for this interpreter (`pip index versions`).
torch is kept out of the resolve because on these versions the registry's build of it is the
multi-GB CUDA one, and nothing else in the set depends on torch, so 2 and 3 together are the set.

Prints one line per version; exits 1 when any does not resolve. A version pyenv does not have
is skipped with a line saying so (the check is about the dependency set, not this machine).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("3.12", "3.13")
TIMEOUT = 600
PIP = "pip>=25"


class NotResolved(Exception):
    pass


def pyenv_python(version: str) -> Path | None:
    try:
        root = Path(subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        root = Path.home() / ".pyenv"
    found = sorted(root.glob(f"versions/{version}.*/bin/python{version}"),
                   key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.parent.name)])
    return found[-1] if found else None


def requirements() -> tuple[list[str], str]:
    """(every requirement but torch, torch's pinned version) from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    torch = [r for r in reqs if re.match(r"torch\s*==", r)]
    if len(torch) != 1:
        raise NotResolved("pyproject.toml does not pin torch with == exactly once")
    return [r for r in reqs if r not in torch], torch[0].split("==")[1].strip()


def pip(venv: Path, pip_dir: Path, *args: str) -> str:
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(pip_dir)})
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        raise NotResolved((errors or done.stderr.strip().splitlines() or ["pip failed"])[-1])
    return done.stdout


def locked() -> dict[str, str]:
    """{name: version} of requirements.lock but torch (kept out of the resolve, as above)."""
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#") and name.strip().lower() != "torch":
            pins[re.sub(r"[-_.]+", "-", name.strip().lower())] = version.strip()
    return pins


def check(version: str, python: Path, pip_dir: Path, reqs: list[str], torch: str) -> str:
    started = time.monotonic()
    pins = locked()
    with tempfile.TemporaryDirectory(prefix=f"resolve-{version}-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([str(python), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
        pip(venv, pip_dir, "install", "--dry-run", "--quiet", "--no-deps", ".")
        report, constraints = Path(tmp) / "report.json", Path(tmp) / "constraints.txt"
        constraints.write_text("".join(f"{name}=={v}\n" for name, v in sorted(pins.items())))
        pip(venv, pip_dir, "install", "--dry-run", "--quiet", "--ignore-installed", "--report", str(report),
            "-c", str(constraints), *reqs)
        chosen = [re.sub(r"[-_.]+", "-", item["metadata"]["name"].lower())
                  for item in json.loads(report.read_text())["install"]]
        beyond = sorted(set(chosen) - set(pins))
        if beyond:
            raise NotResolved(f"Python {version} needs {', '.join(beyond)}, which requirements.lock lacks: "
                              "run `make lock`")
        count = len(chosen)
        listed = pip(venv, pip_dir, "index", "versions", "torch")
        available = re.search(r"Available versions: (.*)", listed)
        if available is None or torch not in [v.strip() for v in available.group(1).split(",")]:
            raise NotResolved(f"torch {torch} has no wheel for Python {version} in the registry")
    return f"{count} packages and torch {torch} in {time.monotonic() - started:.0f} s"


def newer_pip(into: Path) -> None:
    """A current pip, shared by the throw-away venvs (made without one): it resolves this set in
    half the time of the pip that Python 3.12's venv brings."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--target", str(into), PIP], capture_output=True, text=True, timeout=TIMEOUT)
    if done.returncode != 0:
        raise NotResolved(f"could not install {PIP} for the check: "
                          f"{(done.stderr.strip().splitlines() or ['pip failed'])[-1]}")


def main() -> int:
    reqs, torch = requirements()
    found = {v: pyenv_python(v) for v in VERSIONS}
    for version, python in found.items():
        if python is None:
            print(f"ci: no Python {version} in pyenv: its dependency check is skipped")
    ok = True
    with tempfile.TemporaryDirectory(prefix="resolve-pip-") as pip_dir:
        try:
            newer_pip(Path(pip_dir))
        except (NotResolved, subprocess.SubprocessError) as exc:
            print(f"ci: the dependency set was not checked on Python {'/'.join(VERSIONS)}: {exc}")
            return 1
        # Both at once: each waits on the index much of its time.
        with ThreadPoolExecutor(len(VERSIONS)) as pool:
            futures = {v: pool.submit(check, v, p, Path(pip_dir), reqs, torch)
                       for v, p in found.items() if p is not None}
            for version, future in futures.items():
                try:
                    print(f"ci: the locked dependency set resolves on Python {version}: {future.result()}")
                except (NotResolved, subprocess.SubprocessError, OSError) as exc:
                    ok = False
                    print(f"ci: the dependency set does not resolve on Python {version}: {exc}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
