"""The git state of a source tree: its commit and its uncommitted changes as a patch.

A run records the state of the alf source it ran (``alf.trainers.run_provenance``), so a
result can be traced to the exact code: the commit, and ``git diff HEAD`` for what was
edited but not committed (plus new files inside the package, which ``git diff`` leaves
out). Nothing here raises: where there is no answer (git not installed, an installed
package rather than a checkout, git refusing the repository) ``GitState.error`` says why.
"""
import dataclasses
import os
import shutil
import subprocess
import threading
from typing import List, Optional, Sequence, Tuple

#: the most bytes of patch kept; a bigger diff is cut there and marked truncated
MAX_PATCH_BYTES = 8 * 1024 * 1024
#: new (untracked) files inside the package added to the patch, at most
MAX_UNTRACKED_FILES = 50
GIT_TIMEOUT_S = 10.0


@dataclasses.dataclass
class GitState:
    """What :func:`git_state` found.

    Attributes:
        commit: the full hash of ``HEAD``; None when there is none (see ``error``).
        branch: the branch checked out (``HEAD`` when detached).
        top: the repository's top directory.
        patch: ``git diff HEAD --binary`` of the whole repository, then a patch that
            creates each untracked file inside the package; empty when the tree is clean.
        patch_truncated: ``patch`` was cut at ``MAX_PATCH_BYTES`` (it cannot be applied).
        untracked: the untracked files inside the package (paths relative to ``top``).
        error: why there is no commit, e.g. ``"not a git checkout"``.
    """
    commit: Optional[str] = None
    branch: Optional[str] = None
    top: Optional[str] = None
    patch: bytes = b""
    patch_truncated: bool = False
    untracked: List[str] = dataclasses.field(default_factory=list)
    error: Optional[str] = None

    @property
    def dirty(self) -> bool:
        return bool(self.patch)


def git_state(package_dir: str, max_patch_bytes: int = MAX_PATCH_BYTES) -> GitState:
    """The git state of the checkout that holds ``package_dir`` (a source package).

    ``package_dir`` counts as a checkout only when the repository tracks it: an installed
    copy inside some other repository (e.g. a virtualenv in a project's git tree) is not.
    """
    if shutil.which("git") is None:
        return GitState(error="git is not installed")
    package_dir = os.path.realpath(package_dir)
    top, err = _git(package_dir, ["rev-parse", "--show-toplevel"])
    if top is None:
        plain = not err or "not a git repository" in err
        return GitState(error="not a git checkout" if plain else f"not a git checkout ({err})")
    top = top.decode().strip()
    rel = os.path.relpath(package_dir, top)
    tracked, _ = _git(top, ["ls-files", "--", rel])
    if not tracked:
        return GitState(top=top, error=f"not a git checkout ({top} does not track {rel})")
    commit, err = _git(top, ["rev-parse", "--verify", "HEAD"])
    if commit is None:
        return GitState(top=top, error=f"no commit yet ({err})" if err else "no commit yet")
    branch, _ = _git(top, ["rev-parse", "--abbrev-ref", "HEAD"])
    state = GitState(commit=commit.decode().strip(), top=top,
                     branch=branch.decode().strip() if branch else None)
    untracked, _ = _git(top, ["ls-files", "--others", "--exclude-standard", "-z", "--", rel])
    state.untracked = sorted(p for p in (untracked or b"").decode().split("\0") if p)
    diff, err = _capped(top, ["diff", "HEAD", "--binary"], max_patch_bytes)
    if diff is None:
        return dataclasses.replace(state, error=f"git diff failed ({err})")
    for path in state.untracked[:MAX_UNTRACKED_FILES]:
        if len(diff) > max_patch_bytes:
            break
        # exit status 1 means "differs": the new file's patch is on stdout either way
        new, _ = _capped(top, ["diff", "--no-index", "--binary", "--", os.devnull, path],
                         max_patch_bytes - len(diff), ok_status=(0, 1))
        diff += new or b""
    state.patch_truncated = len(diff) > max_patch_bytes
    state.patch = diff[:max_patch_bytes]
    return state


def _env() -> dict:
    # no optional index lock (a diff must not block the user's own git commands); C locale
    return dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C", GIT_TERMINAL_PROMPT="0")


def _git(cwd: str, args: Sequence[str]) -> Tuple[Optional[bytes], str]:
    """``(stdout, "")``, or ``(None, first line of stderr)`` when git fails."""
    try:
        done = subprocess.run(["git", "-C", cwd, *args], capture_output=True, env=_env(),
                              timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return None, str(e)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return None, lines[0] if lines else f"exit status {done.returncode}"
    return done.stdout, ""


def _capped(cwd: str, args: Sequence[str], limit: int,
            ok_status: Sequence[int] = (0,)) -> Tuple[Optional[bytes], str]:
    """Like :func:`_git`, keeping at most ``limit + 1`` bytes of stdout (the process is
    stopped there) so a huge diff costs neither memory nor time."""
    try:
        proc = subprocess.Popen(["git", "-C", cwd, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                env=_env())
    except OSError as e:
        return None, str(e)
    timer = threading.Timer(GIT_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        out = proc.stdout.read(limit + 1)
        cut = len(out) > limit
        if cut:
            proc.kill()
        proc.stdout.close()
        status = proc.wait()
    finally:
        timer.cancel()
    if not cut and status not in ok_status:
        return None, (f"no answer in {GIT_TIMEOUT_S:.0f} s" if status < 0 else
                      f"exit status {status}")
    return out, ""
