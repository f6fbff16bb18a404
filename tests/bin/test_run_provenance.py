"""Every run is reproducible from its directory: ``run_info/`` records where each start came
from (code, command, machine, packages, user modules), and ``alf.bin.train --rerun`` runs
the same experiment again from those records into a new ``root_dir``."""
import hashlib
import json
import os
import subprocess
import textwrap

import pytest
import torch

from alf.bin.rerun import source_change
from alf.trainers import run_provenance
from alf.trainers.user_module_copies import gin_imports
from alf.utils.cpu_budget import usable_cpus
from alf.utils.git_state import GitState, git_state

MY_ALG = textwrap.dedent('''
    """A user's module next to their gin file; it imports a helper module of theirs."""
    import alf
    from my_helpers import DEFAULT_GAMMA


    @alf.configurable
    def my_gamma(value: float = DEFAULT_GAMMA) -> float:
        return value
''')
MY_HELPERS = "DEFAULT_GAMMA = 0.9\n"
EXTRA = "TrainerConfig.num_iterations = 3\nTrainerConfig.random_seed = 7\n" \
        "PPOAlgorithm.gamma = @my_gamma()\n"


def _sha256(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _record(root, n=1):
    return json.loads((root / "run_info" / f"start-{n:04d}.json").read_text())


def _without_import_path(text: str) -> str:
    return "".join(l for l in text.splitlines(True) if not l.startswith("# alf import path: "))


def _progress(root):
    """progress.csv without the wall-clock columns (wall_time_s, fps)."""
    rows = (root / "progress.csv").read_text().splitlines()
    keep = [i for i, c in enumerate(rows[0].split(",")) if c not in ("wall_time_s", "fps")]
    return [[r.split(",")[i] for i in keep] for r in rows]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, alf_cli):
    """Run A (a conf importing the user's module, from another cwd), then break the
    user's module and rerun A into B from a third directory."""
    base = tmp_path_factory.mktemp("provenance")
    project, cwd_a, cwd_b = base / "project", base / "cwd_a", base / "cwd_b"
    for d in (project, cwd_a, cwd_b):
        d.mkdir()
    (project / "my_alg.py").write_text(MY_ALG)
    (project / "my_helpers.py").write_text(MY_HELPERS)
    conf = alf_cli.write_gin(project, "import my_alg\n" + alf_cli.TINY_PPO + EXTRA, "my.gin")
    env = {"ALF_TEST_MARK": "on", "ALF_TEST_API_KEY": "hunter2"}
    a = alf_cli.run("alf.bin.train", [f"--conf={conf}", "--root_dir", base / "a"], cwd_a,
                    env=env)
    assert a.returncode == 0, a.stderr
    # the user edits the module (now broken) and deletes the helper: the rerun must use
    # the copies the run kept
    (project / "my_alg.py").write_text("raise RuntimeError('edited since the run')\n")
    (project / "my_helpers.py").unlink()
    b = alf_cli.run("alf.bin.train", ["--rerun=../a", "--root_dir=../b"], cwd_b)
    assert b.returncode == 0, b.stderr
    return {"base": base, "a": base / "a", "b": base / "b", "cwd_a": cwd_a, "project": project,
            "stderr_b": b.stderr}


def test_start_record_names_code_command_machine_and_packages(runs):
    root = runs["a"]
    record = _record(root)
    assert record["start"] == 1 and record["resumed_from"] is None
    assert record["command"]["cwd"] == str(runs["cwd_a"])
    assert record["command"]["argv"][1:] == [f"--conf={runs['project'] / 'my.gin'}",
                                             "--root_dir", str(root)]
    assert "-m alf.bin.train --conf=" in record["command"]["shell"]
    assert record["config"] == {"file": "config.gin", "random_seed": 7,
                                "sha256": _sha256(root / "config.gin")}
    from importlib import metadata
    assert record["alf"]["version"] == metadata.version("alf")
    git = record["alf"]["git"]
    assert len(git["commit"]) == 40, git  # this test runs in a git checkout of alf
    exists = subprocess.run(["git", "-C", git["top"], "cat-file", "-e", git["commit"]])
    assert exists.returncode == 0, git
    if git["dirty"]:
        patch = root / "run_info" / git["patch"]
        assert git["patch"] == "start-0001.patch" and patch.stat().st_size == git["patch_bytes"]
        assert _sha256(patch) == git["patch_sha256"]
    else:
        assert git["patch"] is None and not (root / "run_info" / "start-0001.patch").exists()
    packages = record["packages"]
    assert f"torch=={torch.__version__}" in packages
    assert (root / "run_info" / "requirements.txt").read_text().splitlines() == packages
    host, device = record["host"], record["device"]
    assert host["usable_cpus"] == usable_cpus() and host["cpu_count"] == os.cpu_count()
    assert device["torch"] == torch.__version__
    assert device["cuda_available"] == torch.cuda.is_available()
    env = record["environment"]
    assert env["ALF_TEST_MARK"] == "on" and env["OMP_NUM_THREADS"] == "1"
    assert "ALF_TEST_API_KEY" not in env  # secrets stay out of a shared run dir


def test_user_modules_and_their_helpers_are_copied(runs):
    copies = runs["a"] / "run_info" / "user_modules"
    assert sorted(os.listdir(copies)) == ["my_alg.py", "my_helpers.py"]
    assert (copies / "my_alg.py").read_text() == MY_ALG
    assert (copies / "my_helpers.py").read_text() == MY_HELPERS
    modules = _record(runs["a"])["user_modules"]
    project = os.path.realpath(runs["project"])
    assert modules["imported"] == [{"module": "my_alg", "kind": "user",
                                    "file": os.path.join(project, "my_alg.py")}]
    assert [(c["module"], c["path"], c["sha256"]) for c in modules["copied"]] == [
        ("my_alg", "my_alg.py", _sha256(copies / "my_alg.py")),
        ("my_helpers", "my_helpers.py", _sha256(copies / "my_helpers.py"))]


def test_rerun_is_the_same_experiment_in_a_new_dir(runs):
    a, b = runs["a"], runs["b"]
    text_a, text_b = (a / "config.gin").read_text(), (b / "config.gin").read_text()
    assert _without_import_path(text_b) == _without_import_path(text_a)
    assert "TrainerConfig.random_seed = 7" in text_b
    # the new run imports its own copies first (resume, play), then the source's
    assert text_b.splitlines()[:2] == [
        f"# alf import path: {b / 'run_info' / 'user_modules'}",
        f"# alf import path: {a / 'run_info' / 'user_modules'}"]
    # the user's module is broken now: the rerun ran the copies, same seed, same curve
    assert _progress(b) == _progress(a)
    assert [r[0] for r in _progress(b)] == ["iteration", "1", "2", "3"]
    record = _record(b)
    assert record["command"]["argv"][1:] == ["--rerun=../a", "--root_dir=../b"]
    copied = {c["path"]: c["file"] for c in record["user_modules"]["copied"]}
    assert copied == {name: os.path.join(os.path.realpath(a), "run_info", "user_modules", name)
                      for name in ("my_alg.py", "my_helpers.py")}
    assert (b / "run_info" / "user_modules" / "my_alg.py").read_text() == MY_ALG
    assert sorted(os.listdir(b / "train")) == ["ckpt-0000000003.pt"]  # trained, not copied


def test_each_start_gets_its_own_record(tmp_path):
    root = tmp_path / "run"
    (root / "train").mkdir(parents=True)
    first = run_provenance.record_start(str(root), "import json\nA.b = 1\n")
    first_text = open(first).read()
    (root / "train" / "ckpt-0000000002.pt").write_bytes(b"")
    second = run_provenance.record_start(str(root), "A.b = 2\n")
    assert os.path.basename(first) == "start-0001.json"
    assert os.path.basename(second) == "start-0002.json"
    assert open(first).read() == first_text  # earlier starts are kept as they were
    assert _record(root, 2)["resumed_from"] == "ckpt-0000000002.pt"
    assert _record(root, 2)["config"]["sha256"] == hashlib.sha256(b"A.b = 2\n").hexdigest()
    # `import json` is a standard-library module: listed, not copied
    assert _record(root, 1)["user_modules"]["imported"][0]["kind"] == "installed"
    assert not (root / "run_info" / "user_modules").exists()
    assert run_provenance.latest_record(str(root))[1] == second


def test_a_failed_record_is_one_warning_and_no_error(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    (root / "run_info").write_text("a file where the folder goes")
    lines = []
    assert run_provenance.record_start(str(root), "", notice=lines.append) is None
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"[alf] warning: could not record this start in "
                               f"{root / 'run_info'} (")
    assert lines[0].endswith("training goes on without it")


def _git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    """A git repository with a committed package ``pkg`` (user and email set locally)."""
    top = tmp_path / "repo"
    (top / "pkg").mkdir(parents=True)
    (top / "pkg" / "__init__.py").write_text("X = 1\n")
    _git(top, "init", "-q")
    _git(top, "add", "pkg")
    _git(top, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return top


def test_git_state_has_the_commit_and_a_patch_that_applies(repo, tmp_path):
    clean = git_state(str(repo / "pkg"))
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert (clean.commit, clean.dirty, clean.error) == (head, False, None)
    (repo / "pkg" / "__init__.py").write_text("X = 2\n")
    (repo / "pkg" / "new.py").write_text("Y = 3\n")  # untracked: not in `git diff HEAD`
    dirty = git_state(str(repo / "pkg"))
    assert dirty.commit == head and dirty.untracked == ["pkg/new.py"]
    assert b"-X = 1\n+X = 2" in dirty.patch and b"+Y = 3" in dirty.patch
    # the patch on the recorded commit gives back the tree the run had
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    (tmp_path / "p.patch").write_bytes(dirty.patch)
    _git(clone, "apply", str(tmp_path / "p.patch"))
    assert (clone / "pkg" / "__init__.py").read_text() == "X = 2\n"
    assert (clone / "pkg" / "new.py").read_text() == "Y = 3\n"
    cut = git_state(str(repo / "pkg"), max_patch_bytes=40)
    assert cut.patch_truncated and cut.patch == dirty.patch[:40]


def test_git_state_without_a_checkout_says_why(repo, tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_state(str(plain)) == GitState(error="not a git checkout")
    # an installed copy inside some other repository (e.g. a venv in a project's tree)
    (repo / "venv" / "pkg").mkdir(parents=True)
    inside = git_state(str(repo / "venv" / "pkg"))
    assert inside.commit is None
    assert inside.error == f"not a git checkout ({repo} does not track venv/pkg)"
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert git_state(str(repo / "pkg")).error == "git is not installed"


def _fake_run(root, git):
    info = root / "run_info"
    info.mkdir(parents=True)
    (info / "start-0001.json").write_text(json.dumps({"alf": {"version": "0.1.0", "git": git}}))
    return str(root)


def test_rerun_warns_when_the_alf_source_changed(tmp_path, monkeypatch):
    now = GitState(commit="c" * 40)
    monkeypatch.setattr(run_provenance, "current_git_state", lambda: now)
    same = _fake_run(tmp_path / "same", {"commit": "c" * 40, "patch": None,
                                         "patch_sha256": None})
    assert source_change(same) == ""
    other = _fake_run(tmp_path / "other", {"commit": "a" * 40, "patch": None,
                                           "patch_sha256": None})
    assert source_change(other) == (f"{other} was trained with alf commit {'a' * 12}; this "
                                    f"alf is {'c' * 12}: results may differ")
    dirty = _fake_run(tmp_path / "dirty", {"commit": "c" * 40, "patch": "start-0001.patch",
                                           "patch_sha256": "0" * 64})
    assert source_change(dirty) == (
        f"{dirty} was trained with alf commit {'c' * 12} plus uncommitted changes saved in "
        f"{dirty}/run_info/start-0001.patch; this alf is {'c' * 12}: results may differ")
    (tmp_path / "old").mkdir()
    assert "has no run_info record" in source_change(str(tmp_path / "old"))


@pytest.fixture
def train_main(monkeypatch, tmp_path, capsys, clean_gin):
    """``train_main(*args) -> (exit status, stderr lines)``, in-process in ``tmp_path``."""
    from absl import flags

    from alf.bin import train
    monkeypatch.chdir(tmp_path)

    def run(*args):
        flags.FLAGS.unparse_flags()  # in-process: flags of the previous call would stay
        code = train.main(["alf.bin.train", *args])
        return code, capsys.readouterr().err.strip().splitlines()
    return run


def test_rerun_mistakes_are_one_line_exit_2_nothing_written(train_main, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.gin").write_text("TrainerConfig.random_seed = 1\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "config.gin").write_text("kept\n")
    cases = [
        (["--rerun=empty", "--root_dir=new"],
         f"--rerun {tmp_path / 'empty'} holds no config.gin: pass the --root_dir of an "
         "earlier run"),
        (["--rerun=missing", "--root_dir=new"],
         f"--rerun {tmp_path / 'missing'} does not exist: pass the --root_dir of an earlier "
         "run"),
        (["--rerun=old", "--conf=ppo_cart_pole.gin", "--root_dir=new"],
         f"--rerun and --conf cannot be combined: --rerun {old} takes that run's config.gin "
         "(change values with --conf_param)"),
        (["--rerun=old", "--root_dir=old/"],
         f"--root_dir is the --rerun directory {old}: pass a new --root_dir for the rerun "
         "(to resume that run, leave out --rerun)"),
        (["--rerun=old", "--root_dir=taken"],
         f"--root_dir {tmp_path / 'taken'} already holds a run: pass a new directory for the "
         "rerun (to resume that run, leave out --rerun)"),
    ]
    for args, message in cases:
        code, lines = train_main(*args)
        assert (code, lines) == (2, [f"alf.bin.train: error: {message}"]), args
    assert not (tmp_path / "new").exists()
    assert sorted(os.listdir(old)) == ["config.gin"]
    assert sorted(os.listdir(tmp_path / "taken")) == ["config.gin"]


def test_gin_imports_reads_every_import_form():
    text = ("from __gin__ import dynamic_registration\nimport my_pkg.algo\nimport a.b as c\n"
            "from os import path\n# import not_me\nA.b = 'import x'\nimport my_pkg.algo\n")
    assert gin_imports(text) == ["my_pkg.algo", "a.b", "os.path"]
