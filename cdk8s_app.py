"""The cdk8s app of this repo: `npx cdk8s synth` runs it (see cdk8s.yaml) and writes
`dist/<cluster>.k8s.yaml`, one chart per stack in `stacks/`, through `jaxinfra.cdk8s`.

Run by `.venv/bin/python` (the README's setup, with the `cdk8s` extra). Stale
`*.k8s.yaml` files in the output folder are removed first, so a deleted stack disappears
from `dist/` too (what Argo CD / Flux then prune). Spec problems are printed one per line,
as `jaxinfra synth` prints them, with exit status 2 and nothing written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# jsii prints a banner on Node versions past their end of life (Node 20 since 2026-10-30):
# silence it for this command only (names checked in jsii's runtime, @jsii/check-node).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


def main() -> int:
    from jaxinfra.errors import JaxinfraError

    try:
        from jaxinfra.cdk8s import stacks_app

        app = stacks_app([Path(__file__).resolve().parent / "stacks"])
    except JaxinfraError as err:
        for p in err.problems:
            print(f"error: {p}", file=sys.stderr)
        print(f"cdk8s_app: {len(err.problems)} problem(s) ({err.kind}); nothing written", file=sys.stderr)
        return 2
    for stale in Path(app.outdir).glob(f"*{app.output_file_extension}"):
        stale.unlink()
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
