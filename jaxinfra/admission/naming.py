"""`metadata.generateName`: the name the API server makes of it, and the same rule for the names controllers
generate (an Indexed Job's pods are created with generateName `<job>-<index>-`).

Source: kubernetes staging/src/k8s.io/apiserver/pkg/storage/names/generate.go (`SimpleNameGenerator`: the base
cut to `maxGeneratedNameLength` = 63 - 5 characters, then 5 random characters) and
staging/src/k8s.io/apimachinery/pkg/util/rand/rand.go (the alphabet: no vowels, no 0, 1 or 3). The one difference:
the characters are drawn from a seed, so a simulation is reproducible.
"""

from __future__ import annotations

import hashlib

GENERATED_NAME_MAX = 58
"""names.maxGeneratedNameLength: 63 less the 5 characters appended."""
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def suffix(seed: str) -> str:
    """5 characters of the API server's alphabet, drawn from `seed`."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:5])


def generate(base: str, seed: str) -> str:
    """The name for `generateName: base`: the base cut to 58 characters, then 5 drawn from `seed`."""
    return base[:GENERATED_NAME_MAX] + suffix(seed)
