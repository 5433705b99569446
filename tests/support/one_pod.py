"""A one-pod Indexed Job as YAML text, the shape the volume and path tests vary: its container `w` runs a shell
command (with --run-command) with the given volumes and mounts."""

from __future__ import annotations

import json
import textwrap


def one_pod_job(
    command: str,
    volumes: str = "[]",
    mounts: str = "[]",
    *,
    name: str = "job",
    namespace: str = "default",
    template_metadata: str = "",
    containers: str = "",
    extra: str = "",
) -> str:
    """`extra` (other documents) first; `template_metadata`: the pod template's metadata as a flow mapping;
    `containers`: more YAML list items after `w`."""
    text = textwrap.dedent(f"""\
        apiVersion: batch/v1
        kind: Job
        metadata: {{name: {json.dumps(name)}, namespace: {json.dumps(namespace)}}}
        spec:
          completionMode: Indexed
          completions: 1
          parallelism: 1
          backoffLimit: 0
          template:
            spec:
              restartPolicy: Never
              volumes: {volumes}
              containers:
              - name: w
                image: i
                command: [sh, -c, {json.dumps(command)}]
                volumeMounts: {mounts}
        """)
    if template_metadata:
        text = text.replace("  template:\n", f"  template:\n    metadata: {template_metadata}\n", 1)
    return extra + text + textwrap.indent(containers, "      ")
