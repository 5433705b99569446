"""Manifests as the API server stores them (defaulted, the webhooks' mutations), which `emulate` reads: what the CLI
hands it after the front door (`jaxinfra_sim.cluster.sources.admitted`); a refused one stays as applied, for the
emulation's own problems."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxinfra.admission import Request, admit


def stored(docs: Sequence[dict[str, Any]], file: str = "test.yaml") -> list[dict[str, Any]]:
    admitted = admit([Request(file, i, doc) for i, doc in enumerate(docs)])
    kept = {r.index: obj for r, obj in admitted.stored}
    return [kept.get(i, doc) for i, doc in enumerate(docs)]
