"""The Kubernetes API server, as the simulation's pods and controllers meet it (Kubernetes 1.37): the objects it
holds and serves (`objects`), label and field selectors (`selectors`), RBAC with the default policy every cluster has
(`rbac`), the wire format of a request (`request`) and its errors (`api_errors`), HTTPS serving in a process of its own
(`serving`, `server`), and admission of the pods a workload's controllers create (`admission`). The front door every
input passes first (decoding, schemas, defaulting, webhooks, validation) is `jaxinfra.admission`, shared with
`jaxinfra validate`."""
