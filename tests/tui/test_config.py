from tui.config import CockpitConfig


def test_preferences_round_trip_and_a_bad_file_falls_back_in_one_line(tmp_path):
    config, problem = CockpitConfig.load(tmp_path)
    assert problem is None and config.theme == "dark"
    config.theme = "light"
    config.save(tmp_path)
    assert CockpitConfig.load(tmp_path)[0].theme == "light"
    (tmp_path / "cockpit.json").write_text('{"theme": "purple"}')
    config, problem = CockpitConfig.load(tmp_path)
    assert config.theme == "dark"
    assert problem is not None and "cockpit.json" in problem and "\n" not in problem
