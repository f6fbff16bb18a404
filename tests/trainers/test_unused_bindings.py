"""A binding nothing uses (wrong class name, overridden parameter) is reported after iteration 1."""
from alf import config as alf_config


def test_unused_binding_is_reported(make_trainer, tmp_path, capsys):
    trainer = make_trainer(tmp_path / "run", params=[
        "ActorDistributionRNNNetwork.lstm_hidden_size = 3",  # this experiment builds no RNN
        "TrainerConfig.num_iterations = 1"], quiet=False)
    trainer.run()
    err = capsys.readouterr().err
    assert "gin bindings never used" in err
    assert "ActorDistributionRNNNetwork.lstm_hidden_size" in err
    # the used ones are not listed
    assert "ActorDistributionNetwork.fc_layer_params" not in err.split("never used")[1].splitlines()[0]


def test_no_warning_when_everything_is_used(make_trainer, tmp_path, capsys):
    trainer = make_trainer(tmp_path / "run", params=["TrainerConfig.num_iterations = 1"],
                           quiet=False)
    trainer.run()
    assert alf_config.unused_bindings() == []
    assert "never used" not in capsys.readouterr().err
