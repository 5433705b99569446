"""The Kubeflow Training Operator v1's JAXJob validating webhook (`jaxjob_validate`), on create.

Assumed configuration: the operator's default manifests (manifests/base/webhook/manifests.yaml registers
`validator.jaxjob.training-operator.kubeflow.org` for jaxjobs, CREATE and UPDATE, failurePolicy Fail, no selector);
the operator has no mutating webhook for JAXJob (its defaults are the controller's).

Source: kubeflow/training-operator release-1.9 @ 078ec30ff26649a07d2e28893c332d4cef70e233 (the file unchanged since
8285aff08, "Add JAX controller", v1.9.0): pkg/webhooks/jax/jaxjob_webhook.go validateJAXJob: the name must be a
DNS-1035 label (`should match: ...`), and for every replica type of spec.jaxReplicaSpecs: the type must be `Worker`
(NotSupported), the template must have containers (Required, "must be specified"), each with an image (Required,
"must be required"), one of them named `jax` (Required, "must have at least one container with name jax");
pkg/apis/kubeflow.org/v1/jax_types.go (JAXJobDefaultContainerName, JAXJobReplicaTypeWorker). The denial is the
aggregate of every field error, as controller-runtime's CustomValidator returns it.

Knowingly not emulated: update-time rules (the same checks, on an update).
"""

from __future__ import annotations

from collections.abc import Mapping

from jaxinfra.admission.decoded import as_list, as_map, as_str, dig
from jaxinfra.admission.store import Finding, Path, meta
from jaxinfra.admission.validation import dns1035_label
from jaxinfra.admission.validation.messages import invalid_value, not_supported, required_value
from jaxinfra.upstream import JAXJOB_CONTAINER, JAXJOB_REPLICA


def jaxjob_validate(obj: Mapping) -> list[Finding]:
    """The JAXJob validator's field errors, in its order (the name, then each replica type)."""
    out: list[Finding] = []
    name = meta(obj).get("name")
    if isinstance(name, str) and (errors := dns1035_label(name)):
        out.append(
            invalid_value(
                ("metadata", "name"),
                name,
                "should match: " + ",".join(errors),
                "name the JAXJob with lower-case letters, digits and '-', starting with a letter",
            )
        )
    specs = as_map(obj.get("spec")).get("jaxReplicaSpecs")
    if specs is None:
        out.append(required_value(("spec", "jaxReplicaSpecs"), "add jaxReplicaSpecs with a Worker", "must be required"))
    for replica_type, spec in as_map(specs).items():
        at: Path = ("spec", "jaxReplicaSpecs", replica_type)
        containers_at: Path = (*at, "template", "spec", "containers")
        if replica_type != JAXJOB_REPLICA:
            out.append(not_supported(at, replica_type, [JAXJOB_REPLICA], f"name the replica type {JAXJOB_REPLICA!r}"))
        containers = as_list(dig(spec, "template", "spec").get("containers"))
        if not containers:
            out.append(required_value(containers_at, "add the worker's container", "must be specified"))
        for i, container in enumerate(containers):
            if not as_str(as_map(container).get("image")):
                out.append(
                    required_value((*containers_at, i, "image"), "set the container's image", "must be required")
                )
        if not any(as_map(c).get("name") == JAXJOB_CONTAINER for c in containers):
            out.append(
                required_value(
                    containers_at,
                    f"name the training container {JAXJOB_CONTAINER!r} (the operator reads the coordinator's port "
                    "from it)",
                    f"must have at least one container with name {JAXJOB_CONTAINER}",
                )
            )
    return out
