"""The container runtime, as containerd and runc run a node's containers: runc itself (`runc`, runc 1.1 and
later as the distributions ship it, its advisories checked by `node.parts`), the shim that parents each container
(`shim`), the pod sandbox's namespaces and mounts (`sandbox`), the root filesystem (`rootfs`), paths opened beneath a
trusted folder by descriptor as the kubelet's subpath code does (`subpath`), the RuntimeDefault seccomp profile
(`seccomp`), and images as a node has them, unpacked by umoci from OCI layouts or `docker save` archives
(`oci_image`, `image_config`; `image_cache`, `tar_headers`, and `confined`, where skopeo and umoci run)."""
