"""A gin ``import my_alg`` finds ``my_alg.py`` next to the --conf file from any working
directory, for train, resume and play (it used to work only when cwd held my_alg.py)."""
import textwrap

MY_ALG = textwrap.dedent('''
    """A user's module next to their gin file: one configurable that changes gamma."""
    import alf


    @alf.configurable
    def my_gamma(value: float = 0.5) -> float:
        return value
''')


def test_import_next_to_conf_from_any_cwd(alf_cli, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_alg.py").write_text(MY_ALG)
    alf_cli.write_gin(project, "import my_alg\n" + alf_cli.TINY_PPO +
                      "TrainerConfig.num_iterations = 1\nPPOAlgorithm.gamma = @my_gamma()\n"
                      "my_gamma.value = 0.9\n", "my.gin")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "run"
    train = alf_cli.run("alf.bin.train", ["--conf", str(project / "my.gin"), "--root_dir",
                                          str(root)], elsewhere)
    assert train.returncode == 0, train.stderr
    assert "my_gamma.value = 0.9" in (root / "config.gin").read_text()
    # resume and play from a third directory: the saved config remembers the folder
    third = tmp_path / "third"
    third.mkdir()
    resume = alf_cli.run("alf.bin.train", ["--root_dir", str(root), "--conf_param",
                                           "TrainerConfig.num_iterations=2"], third)
    assert resume.returncode == 0, resume.stderr
    assert "resumed from iteration 1" in resume.stderr
    play = alf_cli.run("alf.bin.play", ["--root_dir", str(root), "--num_episodes", "1"], third)
    assert play.returncode == 0, play.stderr
    assert "episode 1: return" in play.stdout
