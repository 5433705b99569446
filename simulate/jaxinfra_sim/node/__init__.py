"""This machine as a Kubernetes node: the kernel's cgroup file systems and each pod's groups, as the kubelet's
container manager makes them (`cgroupfs`, `cgroups`), what the node can hold (`capacity`), the machine while pods run
(`machine`: memory, the OOM killer, refusals to fork), the node a simulation's pods share (`node`), and the parts a node
image would bring, checked before a run starts and installed by `jaxinfra doctor` (`parts`, `package_manager`,
`runc_advisories`, `doctor`)."""
