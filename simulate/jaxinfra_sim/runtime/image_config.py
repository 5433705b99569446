"""An image's config applied as the kubelet and containerd apply it (`applied`): the container's command and args
against the image's Entrypoint and Cmd, its env over the default PATH and the image's Env, WorkingDir unless
`workingDir`, User unless runAsUser (read from the image's own /etc/passwd and /etc/group), and the kubelet's
runAsNonRoot refusal against the image's User. The image itself is `oci_image.py`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jaxinfra_sim.runtime.oci_image import Config, Image, ImageError, user_ids

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""containerd's default PATH (pkg/oci `defaultUnixEnv`), which `WithDefaultPathEnv` gives every container before the
image's env and the container's."""


def process(config: Config, command: Sequence[str], args: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(command, args) as containerd runs them (containerd @ 030e9a19 internal/cri/opts/spec_opts.go
    `WithProcessArgs`, from moby's daemon/commit.go): a container's `command` replaces the image's Entrypoint and
    drops its Cmd; without one, its `args` replace Cmd; an Entrypoint of one empty string is none."""
    if command:
        return tuple(command), tuple(args)
    entrypoint = () if config.entrypoint == ("",) else config.entrypoint
    return entrypoint, tuple(args) or config.cmd


def env(config: Config, own: Mapping[str, str]) -> dict[str, str]:
    """The container's env as containerd builds it (containerd @ 01dc4ae3 internal/cri/server/container_create.go
    `buildLinuxSpec`): the default PATH, then the image's Env, then the container's, a later value replacing an
    earlier one of the same name."""
    key, _, value = DEFAULT_PATH.partition("=")
    return {key: value, **dict(config.env), **own}


def non_root_refused(security: Any, config: Config) -> str | None:
    """Why the kubelet refuses to start a container under runAsNonRoot without runAsUser, from its image's User
    (kubernetes @ 1f671eec pkg/kubelet/kuberuntime/security_context_others.go `verifyRunAsNonRoot`; the uid or name
    as containerd's image status gives it, no User as root: kuberuntime_container.go `getImageUser`), or None."""
    if not (security.non_root and security.image_user):
        return None
    user = config.user.partition(":")[0]
    if user and not (user.isascii() and user.isdigit()):
        return f"container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root"
    if not user or int(user) == 0:
        return "container has runAsNonRoot and image will run as root"
    return None


def applied(pod: Any, image: Image) -> Any:
    """`pod` (a `model.Pod`, as one container sees it) with its image's config applied as the kubelet and containerd
    apply it: the kubelet hands the container's command, args, workingDir and env to the runtime as the manifest
    writes them (kubernetes @ fbba6b47 pkg/kubelet/kuberuntime/kuberuntime_container.go `generateContainerConfig`);
    containerd fills the rest from the image (`process`, `env`; WorkingDir unless `workingDir`, User unless
    runAsUser: containerd @ 01dc4ae3 internal/cri/server/container_create.go `buildLinuxSpec`,
    `platformSpecOpts`). Raises `ImageError` for a User the image does not have (containerd's create fails)."""
    command, args = process(image.config, pod.command, pod.args)
    security = pod.security
    if security.image_user and image.config.user:
        ids = user_ids(image.rootfs, image.config.user)
        if isinstance(ids, str):
            raise ImageError(
                image.name,
                image.source,
                f"its User {image.config.user!r}: {ids}",
                "set runAsUser on the container, or fix the image's USER",
            )
        uid, gid = ids
        notes = tuple(n for n in security.notes if not n.startswith("no runAsUser"))
        security = dataclasses.replace(
            security, uid=uid, gid=gid if security.image_group else security.gid, notes=notes
        )
    elif security.image_user and security.uid == 0:  # no User: root, as the resolved default already says
        security = dataclasses.replace(security, notes=tuple(n for n in security.notes if not n.startswith("no runAs")))
    return dataclasses.replace(
        pod,
        command=command,
        args=args,
        working_dir=pod.working_dir or image.config.working_dir or None,
        env=env(image.config, pod.env),
        security=security,
    )
