"""The pods' network, as a cluster's network plugin, kube-proxy and cluster DNS make it: one network namespace
per simulation held by a program of its own (`netns_holder`, `netns_setup`, `netns_workers`, `netns_egress`,
`netns_boundary`: the standard library only) and driven by `netns`; each pod's namespace wired by the CNI plugins
(CNI spec 1.0.0, the containernetworking/plugins bridge, host-local and loopback); NetworkPolicy in nftables
(`netpol`); Services' cluster IPs by kube-proxy's nftables mode (`kubeproxy`); and the names kube-dns answers (`dns`,
`resolution`)."""
