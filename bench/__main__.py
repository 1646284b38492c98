"""Run every benchmark module in this package, each in its own process so one's memory or imports never
colour another's numbers.

    python -m bench                      # all of them, in name order
    python -m bench analysis --limit 300 # one of them, with its own arguments
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if not m.name.startswith("_"))


def run(name: str, args: list[str]) -> int:
    print(f"== bench.{name} {' '.join(args)}".rstrip(), flush=True)
    started = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", f"bench.{name}", *args], cwd=HERE.parent).returncode
    print(f"== bench.{name}: {'ok' if code == 0 else f'failed (exit {code})'} in {time.perf_counter() - started:.0f}s",
          flush=True)
    return code


def main(argv: list[str]) -> int:
    known = modules()
    if argv and not argv[0].startswith("-"):
        if argv[0] not in known:
            print(f"error: no benchmark {argv[0]!r}; known: {', '.join(known)}", file=sys.stderr)
            return 1
        return run(argv[0], argv[1:])
    failed = [name for name in known if run(name, argv) != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
