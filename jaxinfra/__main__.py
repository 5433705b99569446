"""`python -m jaxinfra`: the same as the `jaxinfra` command."""

from jaxinfra.entry import entry

entry()
