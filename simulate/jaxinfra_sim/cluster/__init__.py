"""The simulated cluster, whole: the control plane over the manifests (`control_plane`: admission, the
controllers, Kueue and the kubelet's view of each pod, with `apiview`, what the API server holds after them), what one
invocation applies (`sources`), what the workloads of one simulation share (`shared`), each workload attempt after
attempt (`attempts`), every workload side by side (`workloads`), the simulation from its checks to its verdict
(`engine`), and `jaxinfra explain`'s why-would-it-pend (`pending`). Each step cites the controller or component it
follows in its own module."""
