"""The cdk8s app of this repo: `npx cdk8s synth` runs it (see cdk8s.yaml) and writes
`dist/<cluster>.k8s.yaml`, one chart per stack in `stacks/`, through `jaxinfra.cdk8s.main`
(stale files removed first; spec problems one per line, status 2, nothing written).

Run by `.venv/bin/python` (the README's setup, with the `cdk8s` extra). A repository made by
`jaxinfra init` runs `python -m jaxinfra.cdk8s` instead; this file only adds jsii's banner setting.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# jsii prints a banner on Node versions past their end of life (Node 20 since 2026-10-30):
# silence it for this command only (names checked in jsii's runtime, @jsii/check-node).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


if __name__ == "__main__":
    from jaxinfra.cdk8s import main

    sys.exit(main([Path(__file__).resolve().parent / "stacks"]))
