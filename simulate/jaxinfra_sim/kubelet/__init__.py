"""The kubelet, as it runs the pods the controllers created (Kubernetes 1.37, pkg/kubelet): a pod's
containers as kuberuntime makes them (`kuberuntime`: env, command, devices), the container's files and process
(`container`), volumes and the downward API (`volumes`, `downward`), the prober (`prober`), local storage eviction
(`eviction`), QoS and the OOM killer's order (`qos`), pod status (`podstatus`), each pod's network (`podnetworks`), the
image's Python (`image`), and the pod workers that run an attempt's pods as real processes (`pod_workers`, with its
`relay` of their output, `reaper` of their exits and `faultsignals`)."""
