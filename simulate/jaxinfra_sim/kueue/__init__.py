"""Kueue (kubernetes-sigs/kueue v0.19.2), as it decides over a workload labelled with a queue: its scheduler's
admission with flavors, admission checks and partial admission (`scheduler`; upstream pkg/scheduler,
pkg/scheduler/flavorassigner, pkg/controller/admissionchecks), the quota tree of ClusterQueues and Cohorts
(`cohorts`; pkg/cache), and ClusterQueue quota while a simulation's workloads run side by side (`quotas`). It never
imports the workload controllers, nor they it."""
