"""The k9s plugin (issue 48): the shipped file is valid for k9s's plugin schema and opens the
cockpit on the selected TrainJob, JobSet or RayJob in k9s's context and namespace;
`kfcockpit k9s install-plugin` merges it into the user's k9s plugins file, where k9s reads it,
without touching their other plugins."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from tui.cli import main
from tui.cli.k9s_cmds import k9s_plugins_file, shipped_plugins

# k9s's own schema of plugins.yaml (derailed/k9s internal/config/json/schemas/plugins.json), which
# k9s checks the file against before it loads a plugin from it (internal/config/plugin.go, Plugins.load).
K9S_PLUGINS_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "K9s plugins schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "plugins": {
            "type": "object",
            "additionalProperties": {
                "properties": {
                    "shortCut": {"type": "string"},
                    "override": {"type": "boolean"},
                    "description": {"type": "string"},
                    "confirm": {"type": "boolean"},
                    "dangerous": {"type": "boolean"},
                    "scopes": {"type": "array", "items": {"type": "string"}},
                    "command": {"type": "string"},
                    "background": {"type": "boolean"},
                    "overwriteOutput": {"type": "boolean"},
                    "args": {"type": "array", "items": {"type": ["string", "number"]}},
                },
                "required": ["shortCut", "description", "scopes", "command"],
            },
            "required": [],
        }
    },
    "required": ["plugins"],
}

THEIRS = """\
# my plugins
plugins:
    # tail logs with stern
    stern:
        shortCut: Ctrl-L
        description: Logs (stern)
        scopes: [pods]
        command: stern
        background: false
        args: [--tail, "50", $FILTER, -n, $NAMESPACE, --context, $CONTEXT]
"""


@pytest.fixture
def k9s_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("K9S_CONFIG_DIR", str(tmp_path / "k9s"))
    return tmp_path / "k9s"


def shipped() -> dict:
    return yaml.safe_load(shipped_plugins().read_text())


def test_the_shipped_plugin_is_valid_for_k9s_and_follows_the_selected_job_in_its_context():
    document = shipped()
    jsonschema.validate(document, K9S_PLUGINS_SCHEMA)
    (plugin,) = document["plugins"].values()
    # k9s's plugin docs: scopes are the views' resource names; $NAME, $NAMESPACE and $CONTEXT
    # are the selected row's name, its namespace and k9s's context.
    assert set(plugin["scopes"]) == {"trainjobs", "jobsets", "rayjobs"}
    assert plugin["command"] == "kfcockpit" and plugin["background"] is False
    args = plugin["args"]
    assert args[args.index("--follow") + 1] == "$NAME"
    assert args[args.index("--namespace") + 1] == "$NAMESPACE"
    assert args[args.index("--context") + 1] == "$CONTEXT"
    from tui.cli import build_parser

    parsed = build_parser().parse_args(args)  # what k9s runs is a command line kfcockpit takes
    assert (parsed.follow, parsed.namespace, parsed.context) == ("$NAME", "$NAMESPACE", "$CONTEXT")


def test_the_plugins_file_is_where_k9s_reads_it():
    """k9s internal/config/files.go: K9S_CONFIG_DIR wins (initK9sEnvLocs), else the XDG config
    home's k9s folder (initXDGLocs)."""
    assert k9s_plugins_file({"K9S_CONFIG_DIR": "/a", "XDG_CONFIG_HOME": "/b"}) == Path("/a/plugins.yaml")
    assert k9s_plugins_file({"XDG_CONFIG_HOME": "/b"}) == Path("/b/k9s/plugins.yaml")
    assert k9s_plugins_file({"K9S_CONFIG_DIR": "", "XDG_CONFIG_HOME": "/b"}).parent.name == "k9s"


def test_install_into_no_file_writes_the_shipped_one(k9s_dir, capsys):
    assert main(["k9s", "install-plugin"]) == 0
    assert (k9s_dir / "plugins.yaml").read_text() == shipped_plugins().read_text()
    assert "Shift-K" in capsys.readouterr().out


def test_install_keeps_the_users_plugins_and_comments_and_is_idempotent(k9s_dir, capsys):
    k9s_dir.mkdir()
    path = k9s_dir / "plugins.yaml"
    path.write_text(THEIRS)
    assert main(["k9s", "install-plugin"]) == 0
    text = path.read_text()
    assert text.startswith(THEIRS)  # their bytes, comments included, untouched
    document = yaml.safe_load(text)
    jsonschema.validate(document, K9S_PLUGINS_SCHEMA)
    assert document["plugins"]["stern"] == yaml.safe_load(THEIRS)["plugins"]["stern"]
    assert document["plugins"]["kfcockpit"] == shipped()["plugins"]["kfcockpit"]

    assert main(["k9s", "install-plugin"]) == 0  # again: nothing changes
    assert path.read_text() == text
    assert "already" in capsys.readouterr().out


def test_an_older_kfcockpit_entry_is_replaced_and_theirs_kept(k9s_dir):
    k9s_dir.mkdir()
    path = k9s_dir / "plugins.yaml"
    old = yaml.safe_load(THEIRS)
    old["plugins"]["kfcockpit"] = {"shortCut": "Shift-C", "description": "old", "scopes": ["trainjobs"],
                                   "command": "kfcockpit"}
    old["plugins"]["zzz"] = {"shortCut": "z", "description": "z", "scopes": ["all"], "command": "true"}
    path.write_text(yaml.safe_dump(old))
    assert main(["k9s", "install-plugin"]) == 0
    document = yaml.safe_load(path.read_text())
    assert document["plugins"]["kfcockpit"] == shipped()["plugins"]["kfcockpit"]
    assert {k: v for k, v in document["plugins"].items() if k != "kfcockpit"} == \
        {k: v for k, v in old["plugins"].items() if k != "kfcockpit"}


@pytest.mark.parametrize("text, says", [
    ("plugins: [a, b\n", "is not YAML (line"),
    ("- just\n- a list\n", "not a mapping"),
    ("plugins: [stern]\n", "'plugins' is not a mapping"),
])
def test_a_malformed_plugins_file_is_one_line_exit_2_and_left_untouched(k9s_dir, capsys, text, says):
    k9s_dir.mkdir()
    path = k9s_dir / "plugins.yaml"
    path.write_text(text)
    assert main(["k9s", "install-plugin"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and err.startswith("kfcockpit: ")
    assert path.read_text() == text
