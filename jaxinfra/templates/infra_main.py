"""The Pulumi program that Pulumi.yaml names (written by `jaxinfra init`): all logic is `jaxinfra.pulumi`."""

from jaxinfra.pulumi import program

outputs = program()
