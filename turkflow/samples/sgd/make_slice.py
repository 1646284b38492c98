"""Write dialogues_sample.json.gz, the slice of the Schema-Guided Dialogue corpus's dev split that turkflow
ships: the first dialogs of each file of the project's copy of the split, each kept as its id, its services
and its turns' speakers and utterances (the annotations dropped), so the file is the same on every run.

    python turkflow/samples/sgd/make_slice.py ../shared/data/sgd/dev   # rewrites the slice beside this file
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

PER_FILE = 12  # dialogs taken from each dialogues_NNN.json.gz: every domain of the split, a little of each
OUT = Path(__file__).resolve().parent / "dialogues_sample.json.gz"


def slice_of(dev: Path, per_file: int = PER_FILE) -> list[dict]:
    dialogs = []
    for path in sorted(dev.glob("dialogues_*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for raw in json.load(handle)[:per_file]:
                dialogs.append({"dialogue_id": raw["dialogue_id"], "services": raw["services"],
                                "turns": [{"speaker": t["speaker"], "utterance": t["utterance"]}
                                          for t in raw["turns"]]})
    return dialogs


def compressed(dialogs: list[dict]) -> bytes:
    """The gzip bytes of the slice, with no file name or time in the header (the same bytes every run)."""
    return gzip.compress(json.dumps(dialogs, ensure_ascii=False, indent=0).encode(), compresslevel=9, mtime=0)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    OUT.write_bytes(compressed(slice_of(Path(sys.argv[1]))))
    print(f"wrote {OUT}")
