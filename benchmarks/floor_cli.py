"""The floor of any typer + pydantic CLI: parse one command, validate a 2-field model, dump YAML.

`benchmarks/synth.py` times it beside `jaxinfra synth`, to show how much of the CLI's time is
the mandated libraries' own start-up rather than synthesis.
"""

import typer
import yaml
from pydantic import BaseModel

app = typer.Typer()


class Job(BaseModel):
    name: str
    port: int = 8482


@app.command()
def synth(stack: str, out: str = "out") -> None:
    print(yaml.safe_dump(Job(name=stack).model_dump()))


@app.command()
def other() -> None:
    """A second command, so typer dispatches as it does for jaxinfra."""


if __name__ == "__main__":
    app()
