"""`core.trees.remove_tree`: a container's folder (its writable layer) or an image's staging folder removed whole,
its read-only folders too, by its unprivileged owner; nothing there is nothing to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jaxinfra_sim.core import trees
from tests.support import unprivileged

pytestmark = pytest.mark.unit


def test_nothing_there_is_nothing_to_do(tmp_path: Path) -> None:
    trees.remove_tree(tmp_path / "absent")


@pytest.mark.simulator
def test_read_only_folders_and_an_overlay_work_folder_are_removed_by_their_owner() -> None:
    """As the unprivileged user (as root nothing stops rmtree): folders of mode 0555 and 0 (what overlayfs leaves as
    its work folder), and a link to a folder outside, which is removed as a link, never followed."""
    home = unprivileged.scratch_home()
    outside = home / "outside"
    script = f"""
import os, sys
sys.path.insert(0, {str(unprivileged.ROOT / "simulate")!r}); sys.path.insert(0, {str(unprivileged.ROOT)!r})
from pathlib import Path
from jaxinfra_sim.core import trees
home = Path({str(home)!r})
(home / "outside").mkdir(); (home / "outside" / "keep").write_text("x")
tree = home / "tree"
(tree / "a" / "b").mkdir(parents=True); (tree / "a" / "b" / "f").write_text("x")
(tree / "work" / "work").mkdir(parents=True)
(tree / "link").symlink_to(home / "outside")
os.chmod(tree / "a" / "b", 0o555); os.chmod(tree / "a", 0o555); os.chmod(tree / "work" / "work", 0)
os.chmod(tree / "work", 0o555)
trees.remove_tree(tree)
print("GONE" if not tree.exists() else "LEFT")
"""
    try:
        r = unprivileged.run([sys.executable, "-c", script], home, capture_output=True, text=True, timeout=60)
        assert r.stdout.strip() == "GONE", r.stdout + r.stderr
        assert (outside / "keep").read_text() == "x"
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
