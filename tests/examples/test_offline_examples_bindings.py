"""The bundled pure-offline examples (BC, IQL) bind nothing they do not use: run as
shipped (evaluation on), they print no "gin bindings never used" warning about themselves."""
import pytest


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, alf_cli):
    """A directory holding data/pendulum_expert (random actions: enough to train on)."""
    d = tmp_path_factory.mktemp("offline_examples")
    made = alf_cli.run("alf.bin.export_dataset", ["--conf=sac_pendulum.gin",
                                                  "--out=data/pendulum_expert",
                                                  "--collect_steps=200", "--policy=random"],
                       d, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    return d


@pytest.mark.parametrize("conf", ["bc_pendulum.gin", "iql_pendulum.gin"])
def test_offline_example_uses_every_binding(alf_cli, workdir, conf):
    root = f"runs/{conf[:-4]}"
    run = alf_cli.run("alf.bin.train", [f"--conf={conf}", f"--root_dir={root}",
                                        "--conf_param", "TrainerConfig.num_iterations=1",
                                        "--conf_param", "TrainerConfig.num_updates_per_train_iter=2"],
                      workdir, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "never used" not in run.stderr, run.stderr
    assert "iter 1/1 | updates 2 |" in run.stderr
    assert (workdir / root / "train" / "ckpt-0000000001.pt").exists()
