"""What a cloud platform adds to the pods of its accelerator nodes, as GKE does: the TPU platform's env and
webhook (`gke_tpu`), the Cloud Storage FUSE CSI driver's sidecar injection (`gcsfuse`), and the platform's own
containers stood in where they cannot run here (`standins`). Sources are cited per module (GKE's docs and the
gcs-fuse-csi-driver at a commit)."""
