"""The Pulumi program that Pulumi.yaml names, as `jaxinfra init` writes it: all logic is `jaxinfra.pulumi`, which reads
Pulumi.<stack>.yaml (jaxinfra:stack, jaxinfra:provider and that provider's keys; jaxinfra's README, "Cluster plus job
with Pulumi")."""

from jaxinfra.pulumi import program

outputs = program()
