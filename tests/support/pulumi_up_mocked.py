"""`pulumi up` of the Pulumi project in the working directory, under `pulumi.runtime.set_mocks`: no CLI, no cloud.

Standalone (pulumi and PyYAML only), so that a fresh venv with jaxinfra installed from its wheel runs a scaffold's
program as the Python language host would: from the project's folder, with the stack's config from
Pulumi.<stack>.yaml. Prints the program's outputs as JSON; a program error ends it with status 1 and the message.
`CloudMocks` answers what GCP computes; tests/support/pulumi_harness.py records on top of it.

    python pulumi_up_mocked.py STACK
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

import pulumi
import yaml

CA = "Q0EtREFUQQ=="
PROJECT_NUMBER = "123456789012"  # what getProject answers
GKE_T = "gcp:container/cluster:Cluster"
ACCOUNT_T = "gcp:serviceaccount/account:Account"


class CloudMocks(pulumi.runtime.Mocks):
    """Each resource's state is its inputs plus what the cloud computes: a GKE cluster's endpoint and CA, a service
    account's email; getProject answers the project's number."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        if args.typ == GKE_T:
            state |= {"endpoint": "203.0.113.1", "masterAuth": {"clusterCaCertificate": CA}}
        if args.typ == ACCOUNT_T:
            email = f"{args.inputs['accountId']}@{args.inputs['project']}.iam.gserviceaccount.com"
            state |= {"email": email, "member": f"serviceAccount:{email}"}
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]  # a bare dict: also taken
        if args.token == "gcp:organizations/getProject:getProject":
            return {"projectId": args.args["projectId"], "number": PROJECT_NUMBER}
        return {}


def up(stack: str) -> dict[str, Any]:
    """Run Pulumi.yaml's program with Pulumi.<stack>.yaml's config; its outputs."""
    project = yaml.safe_load(Path("Pulumi.yaml").read_text())
    config = yaml.safe_load(Path(f"Pulumi.{stack}.yaml").read_text())["config"]
    pulumi.runtime.set_mocks(CloudMocks(), project=project["name"], stack=stack, preview=False)
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
    found: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> Any:
        outputs = runpy.run_path(project.get("main", "."), run_name="__main__")["outputs"]
        keys = list(outputs)
        return pulumi.Output.all(*(pulumi.Output.from_input(outputs[k]) for k in keys)).apply(
            lambda values: found.update(zip(keys, values))
        )

    program()
    return found


if __name__ == "__main__":
    try:
        print(json.dumps(up(sys.argv[1]), sort_keys=True), flush=True)
    except pulumi.RunError as err:
        sys.exit(f"pulumi up: {err}")
    # The mocks' event loop, collected at interpreter exit after its selector has closed, sometimes prints an ignored
    # "Invalid file descriptor: -1" traceback (asyncio BaseEventLoop.__del__): the run is over, leave without it.
    os._exit(0)
