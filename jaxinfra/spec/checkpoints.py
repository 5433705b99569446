"""Where a job's checkpoints live, outliving its pods: a Cloud Storage bucket or a PersistentVolumeClaim."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from jaxinfra.quantity import is_quantity
from jaxinfra.spec.base import TAG, Spec, kind_of, subdomain, tagged
from jaxinfra.spec.problems import problem

#: Cloud Storage bucket names (cloud.google.com/storage/docs/buckets#naming): 3-63 characters of lower-case letters,
#: digits, '-', '_' and '.', starting and ending with a letter or digit (up to 222 with dots, each part at most 63);
#: not starting with "goog" nor containing "google".
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")


class GCSBucket(Spec):
    """Checkpoints in a Cloud Storage bucket, mounted with GKE's Cloud Storage FUSE CSI driver: `GCSBucket("my-ckpt")`.

    The pods need GKE's FUSE driver (the cluster add-on) and Workload Identity: the job's Kubernetes
    ServiceAccount is granted the bucket (the Pulumi component creates the bucket, the grant and the add-on).
    """

    _positional = ("bucket",)
    kind: Literal["gcs"] = Field("gcs", description=TAG)
    bucket: str = Field(description="Bucket name (globally unique). Mounted read-write at /checkpoints in every pod.")

    @field_validator("bucket")
    @classmethod
    def _bucket_name(cls, v: str) -> str:
        parts = v.split(".")
        if (
            not _BUCKET.match(v)
            or len(v) < 3
            or len(v) > (222 if "." in v else 63)
            or any(not 0 < len(p) <= 63 for p in parts)
            or v.startswith("goog")
            or "google" in v
        ):
            raise problem(
                "not a Cloud Storage bucket name",
                "use 3-63 lower-case letters, digits, '-' and '_', starting and "
                "ending with a letter or digit, without 'goog' at the start or 'google' anywhere",
            )
        return v


class PVC(Spec):
    """Checkpoints on a PersistentVolumeClaim: an existing claim, `PVC("ckpt")`, or one jaxinfra renders,
    `PVC(size="100Gi")` (named `<job>-checkpoints` unless named).

    Every pod of the job mounts it read-write at once, across nodes: a rendered claim asks for ReadWriteMany, and its
    storage class must provide that (on GKE, Filestore's `standard-rwx`); an existing claim must have it too.
    """

    _positional = ("name",)
    kind: Literal["pvc"] = Field("pvc", description=TAG)
    name: str | None = Field(
        None,
        description="The claim's name; with `size` unset, an existing claim in the job's "
        "namespace. None: jaxinfra renders `<job>-checkpoints` (needs `size`).",
    )
    size: str | None = Field(
        None,
        description="Render the claim with this storage request (e.g. '100Gi'); None: use the existing claim `name`.",
    )
    storage_class: str | None = Field(
        None,
        description="storageClassName of a rendered claim; None: the cluster's default "
        "class, which must offer ReadWriteMany.",
    )

    @field_validator("name", "storage_class")
    @classmethod
    def _names(cls, v: str | None, info: ValidationInfo) -> str | None:
        return (
            None
            if v is None
            else subdomain(v, "PersistentVolumeClaim" if info.field_name == "name" else "StorageClass")
        )

    @field_validator("size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None and not is_quantity(v):
            raise problem("not a Kubernetes quantity", "write it like '100Gi'")
        return v

    @model_validator(mode="after")
    def _existing_or_rendered(self) -> PVC:
        if self.size is None and self.name is None:
            raise problem(
                "names no claim and renders none",
                "give the name of an existing claim, PVC('ckpt'), or a size "
                "for jaxinfra to render one, PVC(size='100Gi')",
            )
        if self.size is None and self.storage_class is not None:
            raise problem(
                "a storage class is for a claim jaxinfra renders",
                "add size=..., or remove storage_class (the existing claim has its own)",
                "storage_class",
            )
        return self

    @property
    def rendered(self) -> bool:
        """Whether jaxinfra renders the claim (else it exists already)."""
        return self.size is not None


Checkpoints = tagged(
    {"gcs": GCSBucket, "pvc": PVC, "none": None},
    "checkpoint storage",
    "use GCSBucket(name) or PVC(name) / PVC(size=...)",
    tag=lambda value: "none" if value is None else kind_of(value),
)
