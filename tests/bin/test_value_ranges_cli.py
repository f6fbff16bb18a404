"""Numbers outside their parameter's declared range fail right after parsing, like a wrong
type (issue 18, item 5): ``TrainerConfig.num_iterations=-5`` used to run a full training
("iter 1/-5"), ``num_env_steps=-5`` with ``num_iterations=3`` ran ("env steps 256/-5"),
``num_env_steps=-5`` alone was refused for the false reason "both are 0", and
``PPOAlgorithm.gamma=1.5`` was accepted.

The real command for the issue's cases (exit status, one line, nothing written), then
many parameters in-process through the same ``main``.
"""
import pytest

# --conf_param values -> the one line the real command prints after "alf.bin.train: error: "
REAL = {
    "iterations": (["TrainerConfig.num_env_steps=64", "TrainerConfig.num_iterations=-5"],
                   "Config error (--conf_param 'TrainerConfig.num_iterations=-5'): "
                   "TrainerConfig.num_iterations = -5 is out of range: it must be >= 0 "
                   "(0: no limit)"),
    "env_steps": (["TrainerConfig.num_iterations=3", "TrainerConfig.num_env_steps=-5"],
                  "Config error (--conf_param 'TrainerConfig.num_env_steps=-5'): "
                  "TrainerConfig.num_env_steps = -5 is out of range: it must be >= 0 "
                  "(0: no limit)"),
    "env_steps_alone": (["TrainerConfig.num_iterations=0", "TrainerConfig.num_env_steps=-5"],
                        "Config error (--conf_param 'TrainerConfig.num_env_steps=-5'): "
                        "TrainerConfig.num_env_steps = -5 is out of range: it must be >= 0 "
                        "(0: no limit)"),
    "gamma": (["PPOAlgorithm.gamma=1.5"],
              "Config error (--conf_param 'PPOAlgorithm.gamma=1.5'): PPOAlgorithm.gamma = 1.5 "
              "is out of range: it must be in [0, 1]"),
}


@pytest.fixture(scope="module")
def real(tmp_path_factory, alf_cli):
    cwd = tmp_path_factory.mktemp("ranges")
    alf_cli.write_gin(cwd, alf_cli.TINY_PPO, "tiny.gin")
    procs = {}
    for name, (params, _) in REAL.items():
        args = ["--conf", "tiny.gin", "--root_dir", f"run_{name}"]
        for p in params:
            args += ["--conf_param", p]
        procs[name] = alf_cli.start("alf.bin.train", args, cwd)
    out = {}
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=120)
        except Exception:  # noqa: BLE001 - a run that trains on instead of failing
            proc.kill()
            stdout, stderr = proc.communicate()
        out[name] = (proc.returncode, stdout, stderr)
    return cwd, out


@pytest.mark.parametrize("name", list(REAL))
def test_out_of_range_real_command(real, name):
    cwd, out = real
    code, stdout, stderr = out[name]
    assert code == 2, stderr[-2000:]
    assert stderr.strip().splitlines() == ["alf.bin.train: error: " + REAL[name][1]], stderr
    assert stdout == ""
    assert not (cwd / f"run_{name}").exists()


CASES = {
    # --conf_param -> words the one-line error must contain
    "TrainerConfig.mini_batch_size=0": ["TrainerConfig.mini_batch_size = 0", ">= 1"],
    "TrainerConfig.initial_collect_steps=-1": ["initial_collect_steps = -1", ">= 0"],
    "TrainerConfig.epsilon_greedy=1.5": ["epsilon_greedy = 1.5", "in [0, 1]"],
    "TrainerConfig.offline_fraction=-0.1": ["offline_fraction = -0.1", "in [0, 1]"],
    "TrainerConfig.priority_replay_alpha=2": ["priority_replay_alpha = 2", "in [0, 1]"],
    "TrainerConfig.random_seed=-1": ["random_seed = -1", ">= 0"],
    "PPOAlgorithm.gae_lambda=1.01": ["PPOAlgorithm.gae_lambda = 1.01", "in [0, 1]"],
    "PPOLoss.importance_ratio_clipping=-0.2": ["importance_ratio_clipping = -0.2", "> 0"],
    "PPOLoss.entropy_regularization=-0.01": ["entropy_regularization = -0.01", ">= 0"],
    "alf.optimizers.Adam.lr=-0.001": ["Adam.lr = -0.001", ">= 0"],  # 0 freezes: allowed
    "alf.optimizers.Adam.betas=(0.9, 1.5)": ["Adam.betas = (0.9, 1.5)", "item 2", "in [0, 1)"],
    "SacAlgorithm.target_update_tau=0": ["SacAlgorithm.target_update_tau = 0", "in (0, 1]"],
    "SacAlgorithm.num_critics=0": ["SacAlgorithm.num_critics = 0", ">= 1"],
    "DqnAlgorithm.gamma=-0.5": ["DqnAlgorithm.gamma = -0.5", "in [0, 1]"],
    "create_environment.num_parallel_environments=0": ["num_parallel_environments = 0", ">= 1"],
    # macros are constants: the value they stand for is checked
    "G=2.0\nPPOAlgorithm.gamma=%G": ["PPOAlgorithm.gamma = 2.0 (through %G)", "in [0, 1]"],
}


@pytest.mark.parametrize("param", list(CASES))
def test_out_of_range_is_one_line_exit_2_nothing_written(param, alf_cli, tmp_path, monkeypatch,
                                                         capsys, clean_gin):
    from absl import flags

    from alf.bin import train
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO, "tiny.gin")
    monkeypatch.chdir(tmp_path)
    flags.FLAGS.unparse_flags()  # in-process: repeated --conf_param would accumulate
    args = ["alf.bin.train", "--conf", "tiny.gin", "--root_dir", "run"]
    for p in param.split("\n"):
        args += ["--conf_param", p]
    code = train.main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert " is out of range: " in lines[0] and " must be " in lines[0], lines[0]
    for word in CASES[param]:
        assert word in lines[0], (word, lines[0])
    assert not (tmp_path / "run").exists()
